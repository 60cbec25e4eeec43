//! What the users store and the bootstrap of the default superuser need
//! from the running node, and nothing more: the [`AuthHost`] trait.
//!
//! Users are client data in the replicated `system_auth` keyspace, so the
//! host hands out the schema's ([`SchemaHost`]: the keyspace is created, and
//! spread, like any other) and adds reads and writes through the coordinator,
//! the clock that stamps and ages them, and the metrics the login gate
//! counts in. The node implements it (in `node/hosts/schema_and_auth.rs`),
//! so no client-auth module names the node's context or the coordinator,
//! and a test can drive the store with a double of its own.

use futures::future::BoxFuture;
use ringstore_metrics::NodeMetrics;
use ringstore_replication::ConsistencyLevel;
use ringstore_storage::{Cell, Timestamp};

use crate::error::Result;
use crate::schema::{KeyspaceDef, SchemaHost};

/// The node as the users store sees it (see the module docs).
pub trait AuthHost: Send + Sync {
    /// What the schema's functions take.
    type Schema: SchemaHost;
    /// The node as the schema sees it: where `system_auth` is created and
    /// from where it is spread.
    fn schema_host(&self) -> &Self::Schema;
    /// `auth.replication_factor`: the SimpleStrategy replication a node
    /// creates `system_auth` with when its schema lacks it.
    fn auth_replication_factor(&self) -> u32;
    /// A new write timestamp from the node's clock: what the creation of
    /// `system_auth`, and a change to a user or to the user index, is
    /// stamped with.
    fn next_timestamp(&self) -> Timestamp;
    /// The node's wall clock (the platform's: simulated in simulations):
    /// whether a cell read is still visible, a deletion's local time, and
    /// the gate's "now".
    fn now(&self) -> Timestamp;
    /// Reads `key` of `keyspace` at `level` through the coordinator, as
    /// a client read would (none: no live cell).
    fn read<'a>(
        &'a self,
        keyspace: &'a KeyspaceDef,
        key: Vec<u8>,
        level: ConsistencyLevel,
    ) -> BoxFuture<'a, Result<Option<Cell>>>;
    /// Writes `cell` to `key` of `keyspace` at `level` through the
    /// coordinator, as a client write would.
    fn write<'a>(
        &'a self,
        keyspace: &'a KeyspaceDef,
        key: Vec<u8>,
        cell: Cell,
        level: ConsistencyLevel,
    ) -> BoxFuture<'a, Result<()>>;
    /// The node's metrics: where the login gate counts refusals.
    fn metrics(&self) -> &NodeMetrics;
}
