//! The coordinator's replica writes, coalesced per peer (`peer_calls/mod.rs`
//! has the design): how calls to a peer are shaped, and what each write
//! gets back; `write_queues_driver.rs` sends the calls.
//!
//! Each write waits for its part of the call's answer: refused or applied,
//! and the members the replica showed (which each write checks against the
//! ring it was placed with, `ring_lag.rs`). A write that gave up waiting
//! while it queued gets its hint, and is not sent.
//!
//! # Caveats
//! - A call that fails fails every write in it (each gets a hint), as it
//!   would have failed each of them sent alone over the same connection.

use std::sync::Arc;

use ringstore_proto::v1 as pb;
use ringstore_replication::BatchLimits;

use crate::coordinator::peer_calls::{self, PeerQueues};
use crate::error::NodeError;

/// How calls to one peer are shaped. One slot: while a call is in flight
/// the next one fills. Measured on 3 nodes (`benches/compare_builds.sh`,
/// five rounds over two sessions), one slot against two gave 4-11 % more
/// QUORUM puts per second for 4-12 % less CPU per put, and four slots were
/// worse than two; an idle peer's first write still leaves at once. The
/// caps keep one call well under the internode message limit and its apply
/// short.
pub(crate) const LIMITS: BatchLimits = BatchLimits {
    calls_in_flight: 1,
    max_items: 256,
    max_bytes: 4 * 1024 * 1024,
};

/// One replica write's part of a call's answer.
#[derive(Clone, Debug)]
pub(crate) struct Delivered {
    /// Why the replica refused this mutation, if it did.
    pub refused: Option<String>,
    /// The members the replica showed in a newer state than the call's ring.
    pub members: Arc<[pb::MemberStamp]>,
}

/// What a write submitted to a queue gets back.
pub(crate) type Delivery = std::result::Result<Delivered, Arc<NodeError>>;

/// A queued write: its mutation, and where its answer goes.
pub(crate) type Waiter = peer_calls::Waiter<pb::ReplicaMutation, Delivered>;

/// The node's per-peer queues of replica writes.
pub(crate) type ApplyQueues = PeerQueues<Waiter>;

impl Default for ApplyQueues {
    fn default() -> ApplyQueues {
        PeerQueues::new(LIMITS)
    }
}
