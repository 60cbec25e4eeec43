//! The coordinator's calls to other replicas, coalesced per peer.
//!
//! A replica request bound for another node is submitted to that peer's
//! queue. If the peer has a free call slot, the request leaves at once as
//! a call of its own, in a task spawned for it; that task then sends the
//! requests that queued behind busy slots, a batch per call, until it ends
//! a call with nobody queued ([`send_calls`]). Each request waits on a
//! oneshot channel for its part of the call's answer ([`Waiter`],
//! [`send_batch`]).
//!
//! The calls run in tasks of their own, not in the requests that submitted
//! them: a client that cancels cannot strand the requests queued behind
//! it, and each request's own timeout still applies: a request that gave
//! up waiting is left out of the call if it had not left yet (so a queue
//! that built up behind a stalled peer drains at once instead of being sent
//! to it call after call).
//!
//! # Layout
//! Writes and reads have the same shape: `<kind>_queues.rs` holds every
//! peer's queue (the state, over `ringstore_replication::PeerBatches`) and
//! `<kind>_queues_driver.rs` submits to it and sends the calls. This file
//! holds what the two share. Besides:
//! - [`write_call`]: one `Apply` call, on the peer's long-lived stream
//!   ([`write_streams`]) or unary;
//! - [`read_many_refusals`]: peers that do not serve `ReadMany` (an older
//!   build during a rolling upgrade).
//!
//! # Caveats
//! - Under load a request waits for a call ahead of it to end before its
//!   own leaves (at most one call's time); an idle node pays a map lookup
//!   under a short `std::sync::Mutex`.
//! - A call that fails fails every request in it, as it would have failed
//!   each of them sent alone over the same connection; the requests share
//!   the error as an `Arc<NodeError>`.

pub mod read_many_refusals;
pub mod read_queues;
pub mod read_queues_driver;
pub mod write_call;
pub mod write_queues;
pub mod write_queues_driver;
pub mod write_streams;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ringstore_replication::{Batch, BatchLimits, PeerBatches};
use tokio::sync::oneshot;

use crate::error::{CoordinatorError, NodeError};

/// A request's part of a call's answer: its own answer, or the call's
/// error, which every request of the call shares.
pub(crate) type Part<A> = Result<A, Arc<NodeError>>;

/// A queued request (`Q`), and where its part of the call's answer (`A`, or
/// the call's error) goes.
pub(crate) struct Waiter<Q, A> {
    pub request: Q,
    pub answer: oneshot::Sender<Part<A>>,
}

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

/// [`send_calls`] for queues of [`Waiter`]s, each batch sent by
/// [`send_batch`] through `call` and given up after `timeout` (the error
/// names the `rpc`); `coalesced` is told how many requests each batch that
/// had queued behind a busy slot carried.
pub(crate) async fn send_waiting_calls<Q, A, C, F>(
    queues: &PeerQueues<Waiter<Q, A>>,
    address: SocketAddr,
    first: Batch<Waiter<Q, A>>,
    (timeout, rpc): (Duration, &'static str),
    call: C,
    coalesced: impl Fn(usize),
) where
    C: Fn(Vec<Q>, u64) -> F,
    F: Future<Output = Vec<Part<A>>>,
{
    let (call, coalesced) = (&call, &coalesced);
    send_calls(queues, address, first, move |batch, queued| async move {
        let timed_out = || {
            Arc::new(NodeError::from(CoordinatorError::NoAnswer {
                replica: address,
                rpc,
                after: timeout,
            }))
        };
        let sent = send_batch(batch, timeout, timed_out, call).await;
        if queued {
            coalesced(sent);
        }
    })
    .await;
}

/// Sends `batch` in one call made by `call` (the requests in order, and the
/// ring checksum they were placed with; each request's part of the answer
/// back, in order), given up after `timeout` with `timed_out`'s error; hands
/// each request its part. A request nobody waits for any more (it gave up
/// while it queued) is left out. Returns how many requests were sent.
pub(crate) async fn send_batch<Q, A, C, F>(
    batch: Batch<Waiter<Q, A>>,
    timeout: Duration,
    timed_out: impl FnOnce() -> Arc<NodeError>,
    call: C,
) -> usize
where
    C: FnOnce(Vec<Q>, u64) -> F,
    F: Future<Output = Vec<Part<A>>>,
{
    let (requests, answers): (Vec<_>, Vec<_>) = batch
        .items
        .into_iter()
        .filter(|w| !w.answer.is_closed())
        .map(|w| (w.request, w.answer))
        .unzip();
    let count = requests.len();
    if count == 0 {
        return 0;
    }
    let parts = match tokio::time::timeout(timeout, call(requests, batch.ring)).await {
        Ok(parts) => parts,
        Err(_) => {
            let error = timed_out();
            (0..count).map(|_| Err(error.clone())).collect()
        }
    };
    for (answer, part) in answers.into_iter().zip(parts) {
        // The request may have stopped waiting: nobody listening is fine.
        let _ = answer.send(part);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(request: u32) -> (Waiter<u32, u32>, oneshot::Receiver<Part<u32>>) {
        let (answer, receiver) = oneshot::channel();
        (Waiter { request, answer }, receiver)
    }

    #[tokio::test]
    async fn each_request_gets_its_part_and_one_that_gave_up_is_not_sent() {
        let (a, mut a_answer) = waiter(1);
        let (b, b_answer) = waiter(2);
        let (c, mut c_answer) = waiter(3);
        drop(b_answer);
        let batch = Batch {
            ring: 9,
            items: vec![a, b, c],
        };
        let sent = send_batch(
            batch,
            Duration::from_secs(1),
            || unreachable!(),
            |requests, ring| async move {
                assert_eq!((requests.clone(), ring), (vec![1, 3], 9));
                requests.into_iter().map(|r| Ok(r * 10)).collect()
            },
        )
        .await;
        assert_eq!(sent, 2);
        assert_eq!(a_answer.try_recv().unwrap().unwrap(), 10);
        assert_eq!(c_answer.try_recv().unwrap().unwrap(), 30);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_its_timeout_fails_every_request_in_it() {
        let (a, mut a_answer) = waiter(1);
        let (b, mut b_answer) = waiter(2);
        let batch = Batch {
            ring: 0,
            items: vec![a, b],
        };
        let address: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let timed_out = || {
            Arc::new(NodeError::from(CoordinatorError::NoAnswer {
                replica: address,
                rpc: "Apply",
                after: Duration::from_millis(10),
            }))
        };
        send_batch(batch, Duration::from_millis(10), timed_out, |_, _| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Vec::new()
        })
        .await;
        for answer in [&mut a_answer, &mut b_answer] {
            let error = answer.try_recv().unwrap().unwrap_err();
            assert_eq!(error.code(), tonic::Code::DeadlineExceeded);
            assert_eq!(
                error.to_string(),
                "127.0.0.1:7000: no answer to Apply within 10ms"
            );
        }
    }
}
