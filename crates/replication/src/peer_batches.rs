//! Coalescing replica requests per peer: which requests (mutations, reads)
//! leave together, in one internode call, and when.
//!
//! A coordinator under load sends every replica write or read as an
//! internode call of its own: one HTTP/2 stream, its frames, its wakeups on
//! both sides, and on the replica one task and, for a write, one storage
//! write and one durability wait each. Batching the requests bound for one
//! peer into one call shares all of that, and lets the replica apply
//! mutations as one storage batch with one sync (group commit). The price
//! is latency, so batching here only happens when there is a queue anyway:
//!
//! - Each peer has a few call slots (`calls_in_flight`). A request that
//!   finds a free slot leaves at once, alone: an idle or lightly loaded node
//!   adds no delay.
//! - A request that finds every slot busy waits in the peer's queue. When a
//!   call ends, its slot takes the longest prefix of the queue that fits the
//!   limits (`max_items`, `max_bytes`, one ring checksum) as the next
//!   call. So the batch size follows the load: a request waits for at most
//!   the calls ahead of it, never for a timer.
//!
//! The caller owns the I/O: it sends each [`Batch`] handed out and reports
//! [`PeerBatches::call_finished`] when the call ends, however it ends.
//!
//! # Invariants
//! - A peer's queue is non-empty only while all its slots are busy: a free
//!   slot is always filled from the queue at once.
//! - Every submitted item leaves in exactly one batch, in submission order
//!   per peer.
//! - A batch holds at least one item; beyond the first, it stays within
//!   `max_items` and `max_bytes` (a single item larger than `max_bytes`
//!   leaves alone).
//! - A batch's items were placed with the same ring (its checksum): the
//!   replica checks the coordinator's ring once per call.
//! - A peer with no call in flight and nothing queued is forgotten, so the
//!   state stays bounded by the peers currently written to.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

/// How calls to a peer are shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Calls one peer may have in flight at once (at least 1).
    pub calls_in_flight: usize,
    /// The most requests in one call (at least 1).
    pub max_items: usize,
    /// The most bytes of requests in one call, unless its first alone is
    /// larger.
    pub max_bytes: usize,
}

/// Requests that leave together in one call to a peer.
#[derive(Debug, PartialEq, Eq)]
pub struct Batch<T> {
    /// The checksum of the ring every item was placed with.
    pub ring: u64,
    /// The items, in the order they were submitted.
    pub items: Vec<T>,
}

/// One item waiting for a call slot.
#[derive(Debug)]
struct Queued<T> {
    item: T,
    ring: u64,
    bytes: usize,
}

/// One peer's calls in flight and queued items.
#[derive(Debug)]
struct PeerQueue<T> {
    in_flight: usize,
    waiting: VecDeque<Queued<T>>,
}

/// Every peer's queue. See the module docs.
#[derive(Debug)]
pub struct PeerBatches<P, T> {
    limits: BatchLimits,
    peers: HashMap<P, PeerQueue<T>>,
}

impl<P: Hash + Eq + Clone, T> PeerBatches<P, T> {
    /// No peers yet; `limits` with every count raised to at least 1.
    pub fn new(limits: BatchLimits) -> PeerBatches<P, T> {
        PeerBatches {
            limits: BatchLimits {
                calls_in_flight: limits.calls_in_flight.max(1),
                max_items: limits.max_items.max(1),
                max_bytes: limits.max_bytes,
            },
            peers: HashMap::new(),
        }
    }

    /// Submits `item` (of `bytes`, placed with the ring of checksum `ring`)
    /// for `peer`. Returns the batch to send now when the peer has a free
    /// slot (the item alone); `None` when it waits for a call to end.
    pub fn submit(&mut self, peer: P, item: T, ring: u64, bytes: usize) -> Option<Batch<T>> {
        let limit = self.limits.calls_in_flight;
        let queue = self.peers.entry(peer).or_insert_with(|| PeerQueue {
            in_flight: 0,
            waiting: VecDeque::new(),
        });
        if queue.in_flight < limit {
            debug_assert!(queue.waiting.is_empty(), "a free slot with a queue");
            queue.in_flight += 1;
            return Some(Batch {
                ring,
                items: vec![item],
            });
        }
        queue.waiting.push_back(Queued { item, ring, bytes });
        None
    }

    /// A call to `peer` ended: the next batch to send in its slot, if items
    /// wait; otherwise the slot is freed.
    pub fn call_finished(&mut self, peer: &P) -> Option<Batch<T>> {
        let limits = self.limits;
        let queue = self.peers.get_mut(peer)?;
        if queue.waiting.is_empty() {
            queue.in_flight = queue.in_flight.saturating_sub(1);
            if queue.in_flight == 0 {
                self.peers.remove(peer);
            }
            return None;
        }
        Some(take_batch(&mut queue.waiting, limits))
    }

    /// How many items wait for `peer` (none for a peer not written to).
    pub fn waiting(&self, peer: &P) -> usize {
        self.peers.get(peer).map_or(0, |q| q.waiting.len())
    }

    /// How many calls to `peer` are in flight.
    pub fn in_flight(&self, peer: &P) -> usize {
        self.peers.get(peer).map_or(0, |q| q.in_flight)
    }
}

/// The longest prefix of `waiting` (non-empty) within `limits` and of the
/// first item's ring.
fn take_batch<T>(waiting: &mut VecDeque<Queued<T>>, limits: BatchLimits) -> Batch<T> {
    let first = waiting.pop_front().expect("a batch is taken from a queue");
    let ring = first.ring;
    let mut bytes = first.bytes;
    let mut items = vec![first.item];
    while let Some(next) = waiting.front() {
        let fits = items.len() < limits.max_items
            && next.ring == ring
            && bytes.saturating_add(next.bytes) <= limits.max_bytes;
        if !fits {
            break;
        }
        let next = waiting.pop_front().expect("the front was there");
        bytes += next.bytes;
        items.push(next.item);
    }
    Batch { ring, items }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: BatchLimits = BatchLimits {
        calls_in_flight: 2,
        max_items: 3,
        max_bytes: 100,
    };

    fn batches() -> PeerBatches<&'static str, u32> {
        PeerBatches::new(LIMITS)
    }

    /// Peer "a" with both call slots taken, then `queued` (item, ring,
    /// bytes) submitted behind them.
    fn busy_with(queued: &[(u32, u64, usize)]) -> PeerBatches<&'static str, u32> {
        let mut b = batches();
        b.submit("a", 0, 7, 1);
        b.submit("a", 0, 7, 1);
        for &(item, ring, bytes) in queued {
            assert!(b.submit("a", item, ring, bytes).is_none(), "{item} waits");
        }
        b
    }

    fn items(batch: Option<Batch<u32>>) -> Vec<u32> {
        batch.map(|b| b.items).unwrap_or_default()
    }

    #[test]
    fn a_request_that_finds_a_free_slot_leaves_alone_at_once() {
        let mut b = batches();
        assert_eq!(items(b.submit("a", 1, 7, 10)), vec![1]);
        assert_eq!(items(b.submit("a", 2, 7, 10)), vec![2]);
        // Another peer has slots of its own.
        assert_eq!(items(b.submit("b", 3, 7, 10)), vec![3]);
        assert_eq!(b.in_flight(&"a"), 2);
        assert_eq!(b.waiting(&"a"), 0);
    }

    #[test]
    fn requests_queued_behind_busy_slots_leave_together_when_a_call_ends() {
        let mut b = batches();
        b.submit("a", 1, 7, 10);
        b.submit("a", 2, 7, 10);
        for i in 3..=7 {
            assert!(b.submit("a", i, 7, 10).is_none(), "{i} waits");
        }
        // At most three per call, in order; the slot stays taken.
        assert_eq!(items(b.call_finished(&"a")), vec![3, 4, 5]);
        assert_eq!(items(b.call_finished(&"a")), vec![6, 7]);
        assert_eq!(b.in_flight(&"a"), 2);
        assert_eq!(b.call_finished(&"a"), None);
        assert_eq!(b.call_finished(&"a"), None);
        // Idle again: forgotten, and the next request leaves at once.
        assert_eq!(b.in_flight(&"a"), 0);
        assert!(b.peers.is_empty());
        assert_eq!(items(b.submit("a", 8, 7, 10)), vec![8]);
    }

    #[test]
    fn a_batch_stays_within_its_bytes_but_an_oversized_request_leaves_alone() {
        let mut b = busy_with(&[(1, 7, 60), (2, 7, 60), (3, 7, 500), (4, 7, 10)]);
        assert_eq!(items(b.call_finished(&"a")), vec![1]);
        assert_eq!(items(b.call_finished(&"a")), vec![2]);
        assert_eq!(items(b.call_finished(&"a")), vec![3]);
        assert_eq!(items(b.call_finished(&"a")), vec![4]);
    }

    #[test]
    fn a_batch_holds_requests_placed_with_one_ring() {
        let mut b = busy_with(&[(1, 7, 10), (2, 8, 10), (3, 8, 10)]);
        let first = b.call_finished(&"a").expect("a batch");
        assert_eq!((first.ring, first.items), (7, vec![1]));
        let second = b.call_finished(&"a").expect("a batch");
        assert_eq!((second.ring, second.items), (8, vec![2, 3]));
    }

    #[test]
    fn every_request_leaves_once_in_order_whatever_the_interleaving() {
        // A deterministic interleaving of submissions and finished calls.
        let mut b: PeerBatches<u8, u32> = PeerBatches::new(LIMITS);
        let mut sent: Vec<u32> = Vec::new();
        let mut in_flight = 0usize;
        let mut state = 12345u64;
        for item in 0..2000u32 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            if let Some(batch) = b.submit(0, item, 1, (state >> 60) as usize * 10) {
                sent.extend(batch.items);
                in_flight += 1;
            }
            if state >> 62 == 0 && in_flight > 0 {
                match b.call_finished(&0) {
                    Some(batch) => sent.extend(batch.items),
                    None => in_flight -= 1,
                }
            }
            assert!(b.in_flight(&0) <= LIMITS.calls_in_flight);
        }
        while in_flight > 0 {
            match b.call_finished(&0) {
                Some(batch) => sent.extend(batch.items),
                None => in_flight -= 1,
            }
        }
        assert_eq!(sent, (0..2000).collect::<Vec<_>>());
        assert!(b.peers.is_empty());
    }

    #[test]
    fn zero_limits_are_raised_to_one() {
        let mut b: PeerBatches<u8, u32> = PeerBatches::new(BatchLimits {
            calls_in_flight: 0,
            max_items: 0,
            max_bytes: 0,
        });
        assert_eq!(items(b.submit(0, 1, 1, 5)), vec![1]);
        assert!(b.submit(0, 2, 1, 5).is_none());
        assert!(b.submit(0, 3, 1, 5).is_none());
        assert_eq!(items(b.call_finished(&0)), vec![2]);
    }
}
