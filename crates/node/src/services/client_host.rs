//! What the `Client` service needs from the running node, and nothing
//! more: the [`ClientHost`] trait.
//!
//! A client request is checked (the node serves, its clock is within the
//! bound, the request within the limits), stamped from the node's clock,
//! and then coordinated; so the host is the coordinator's
//! ([`CoordinatorHost`], and [`CasHost`] for lightweight transactions) and
//! the schema's ([`SchemaHost`]: keyspaces by name) with the checks, the
//! stamp and the client-facing settings added.
//! The node's context implements it (in `node/hosts/serving.rs`).

use std::time::Duration;

use ringstore_storage::Timestamp;

use crate::coordinator::CoordinatorHost;
use crate::coordinator::cas::CasHost;
use crate::error::Result;
use crate::schema::SchemaHost;

/// The node as the `Client` service sees it (see the module docs).
pub(crate) trait ClientHost: CoordinatorHost + CasHost + SchemaHost {
    /// A new write timestamp from the node's clock, for a write that
    /// carries none.
    fn next_timestamp(&self) -> Timestamp;
    /// `UNAVAILABLE` when the node no longer takes writes (drained, or its
    /// disk failed).
    fn check_serving(&self) -> Result<()>;
    /// `UNAVAILABLE` when this node's clock is off from the majority's by
    /// more than `max_clock_offset`, or its timestamps run ahead of it.
    fn check_clock(&self) -> Result<()>;
    /// The limits and bounds a client request is held to.
    fn client_settings(&self) -> ClientSettings;
}

/// The limits and bounds a client request is held to, from the node's
/// configuration.
#[derive(Clone, Copy, Debug)]
pub struct ClientSettings {
    /// The largest value a write may carry, in bytes.
    pub max_value_bytes: usize,
    /// The most mutations in one batch.
    pub max_batch_mutations: usize,
    /// The most bytes of keys and values in one batch.
    pub max_batch_bytes: usize,
    /// How many of a batch's mutations are coordinated at once.
    pub batch_concurrency: usize,
    /// How far ahead of this node's clock a client timestamp may be.
    pub max_client_timestamp_skew: Duration,
    /// The clock bound between nodes (and between a client's deadline and
    /// this node's clock).
    pub max_clock_offset: Duration,
    /// Tests only: serve requests whose client deadline has passed.
    pub ignore_client_deadlines: bool,
}
