//! The coordinator's replica requests, coalesced per peer: the node's
//! queues (the state, over `ringstore_replication::PeerBatches`) and the
//! loop that sends one peer's calls. Writes (`apply_queues.rs`,
//! `batched_applies.rs`) and reads (`read_queues.rs`, `batched_reads.rs`)
//! each have queues of their own; this module holds what they share.
//!
//! A replica request bound for another node is submitted to that peer's
//! queue. If the peer has a free call slot, the request leaves at once as
//! a call of its own, in a task spawned for it; that task then sends the
//! requests that queued behind busy slots, a batch per call, until it ends
//! a call with nobody queued. Each request waits on a oneshot channel for
//! its part of the call's answer.
//!
//! The calls run in tasks of their own, not in the requests that submitted
//! them: a client that cancels cannot strand the requests queued behind
//! it, and each request's own timeout still applies: a request that gave
//! up waiting is left out of the call if it had not left yet (so a queue
//! that built up behind a stalled peer drains at once instead of being sent
//! to it call after call).
//!
//! # Caveats
//! - Under load a request waits for a call ahead of it to end before its
//!   own leaves (at most one call's time); an idle node pays a map lookup
//!   under a short `std::sync::Mutex`.
//! - A call that fails fails every request in it, as it would have failed
//!   each of them sent alone over the same connection.

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use ringstore_replication::{Batch, BatchLimits, PeerBatches};

/// Every peer's queue of one kind of replica request (`W`: a request and
/// where its answer goes). See the module docs.
pub struct PeerQueues<W> {
    batches: Mutex<PeerBatches<SocketAddr, W>>,
}

impl<W> PeerQueues<W> {
    /// No peers yet; calls shaped by `limits`.
    pub(crate) fn new(limits: BatchLimits) -> PeerQueues<W> {
        PeerQueues {
            batches: Mutex::new(PeerBatches::new(limits)),
        }
    }

    /// The queues, for one short step (never held across an await).
    pub(crate) fn lock(&self) -> MutexGuard<'_, PeerBatches<SocketAddr, W>> {
        self.batches.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Sends `first`, then the batches queued for `address` meanwhile, one call
/// at a time, until a call ends with nobody queued. `send` makes one call
/// and hands every request in it its answer; it is told whether its batch
/// had queued behind a busy slot (the first one found a free slot).
pub(crate) async fn send_calls<W, S, F>(
    queues: &PeerQueues<W>,
    address: SocketAddr,
    first: Batch<W>,
    mut send: S,
) where
    S: FnMut(Batch<W>, bool) -> F,
    F: Future<Output = ()>,
{
    // Should a call panic, the slot is given back and every request queued
    // behind it fails (its answer's sender drops) rather than waiting
    // forever.
    struct Abandon<'a, W>(&'a PeerQueues<W>, SocketAddr, bool);
    impl<W> Drop for Abandon<'_, W> {
        fn drop(&mut self) {
            if self.2 {
                while self.0.lock().call_finished(&self.1).is_some() {}
            }
        }
    }
    let mut guard = Abandon(queues, address, true);
    let mut batch = first;
    let mut queued = false;
    loop {
        send(batch, queued).await;
        match queues.lock().call_finished(&address) {
            Some(next) => batch = next,
            None => break,
        }
        queued = true;
    }
    guard.2 = false;
}
