//! The coordinator's replica writes, coalesced per peer: the node's queues
//! (the state, over `ringstore_replication::ApplyBatches`) and what each
//! write gets back; `batched_applies.rs` sends the calls.
//!
//! A replica write bound for another node is submitted to that peer's
//! queue. If the peer has a free call slot, the write leaves at once as a
//! call of its own, in a task spawned for it; that task then sends the
//! writes that queued behind busy slots, a batch per call, until it ends a
//! call with nobody queued. Each write waits on a oneshot channel for its
//! part of the call's answer: refused or applied, and the members the
//! replica showed (which each write checks against the ring it was placed
//! with, `ring_lag.rs`).
//!
//! The calls run in tasks of their own, not in the requests that submitted
//! the writes: a client that cancels cannot strand the writes queued behind
//! it, and each write's own timeout still applies: a write that gave up
//! waiting gets its hint, and is left out of the call if it had not left
//! yet (so a queue that built up behind a stalled peer drains at once
//! instead of being sent to it call after call).
//!
//! # Caveats
//! - Under load a write waits for a call ahead of it to end before its own
//!   leaves (at most one call's time); an idle node pays a map lookup under
//!   a short `std::sync::Mutex`.
//! - A call that fails fails every write in it (each gets a hint), as it
//!   would have failed each of them sent alone over the same connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use ringstore_proto::v1 as pb;
use ringstore_replication::{ApplyBatches, BatchLimits};
use tokio::sync::oneshot;

use crate::shared_error::SharedError;

/// How calls to one peer are shaped. Two slots keep a call in flight while
/// the next one fills; the caps keep one call well under the internode
/// message limit and its apply short.
pub(crate) const LIMITS: BatchLimits = BatchLimits {
    calls_in_flight: 2,
    max_mutations: 256,
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
pub(crate) type Delivery = std::result::Result<Delivered, SharedError>;

/// A queued write: its mutation, and where its answer goes.
pub(crate) struct Waiter {
    pub mutation: pb::ReplicaMutation,
    pub answer: oneshot::Sender<Delivery>,
}

/// The node's per-peer queues of replica writes. See the module docs.
pub struct ApplyQueues {
    batches: Mutex<ApplyBatches<SocketAddr, Waiter>>,
}

impl Default for ApplyQueues {
    fn default() -> ApplyQueues {
        ApplyQueues {
            batches: Mutex::new(ApplyBatches::new(LIMITS)),
        }
    }
}

impl ApplyQueues {
    /// The queues, for one short step (never held across an await).
    pub(crate) fn lock(&self) -> MutexGuard<'_, ApplyBatches<SocketAddr, Waiter>> {
        self.batches.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
