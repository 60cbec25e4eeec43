//! `ReplayScheduler`: decides which target gets the next batch of hints, and
//! when — the sans-IO state machine the node's replay task drives.
//!
//! # Protocol
//! The node tells the scheduler what it learns — [`target_up`](ReplayScheduler::target_up)
//! / [`target_down`](ReplayScheduler::target_down) from membership,
//! [`pause`](ReplayScheduler::pause) / [`resume`](ReplayScheduler::resume) /
//! [`set_rate`](ReplayScheduler::set_rate) from the admin — and then calls
//! [`poll`](ReplayScheduler::poll) until it stops returning
//! [`ReplayAction::Deliver`]. For each `Deliver { target, max_bytes }` it
//! reads [`HintStore::next_batch`](crate::HintStore::next_batch), sends the
//! batch, and on the target's acknowledgement deletes the hints and calls
//! [`delivered`](ReplayScheduler::delivered); on an error or timeout it
//! keeps the hints and calls [`failed`](ReplayScheduler::failed).
//! [`ReplayAction::WaitUntil`] says when to poll again at the latest;
//! [`ReplayAction::Idle`] says nothing will happen until the node reports an
//! event. Polling again after any event is always safe.
//!
//! # Throttle accounting (the choice made)
//! A `Deliver` is issued only when the [`Throttle`] would allow its
//! `max_bytes` now, and `max_bytes` is *reserved* from it at once, so
//! deliveries issued in the same instant to several targets cannot overspend.
//! [`delivered`](ReplayScheduler::delivered) settles the reservation against
//! the bytes actually sent (a batch may be smaller, or — being at least one
//! hint — larger); [`failed`](ReplayScheduler::failed) refunds it, as nothing
//! is known to have been applied (the backoff paces retries). So the long-run
//! rate is the rate of bytes actually delivered.
//!
//! # Invariants
//! - At most one delivery is in flight per target; targets with hints are
//!   served round-robin, in host-id order after the last one served.
//! - Nothing is issued while paused, nor to a target that is down, backing
//!   off, or (per the caller's `has_hints`) has no hints.
//! - After the n-th consecutive failure a target waits
//!   `min(initial × 2ⁿ⁻¹, max)` before its next delivery; a success or a
//!   fresh `target_up` resets that.
//!
//! # Caveats
//! - Targets are known only through `target_up` / `set_liveness`: the node
//!   must report every live host it holds hints for, at startup and whenever
//!   it may have missed an event (it rescans its membership view).
//! - One throttle for all targets (Cassandra's is per node too); the rate is
//!   not divided among targets.
//! - Targets that leave the cluster stay in the table (a few bytes each)
//!   until the process restarts; their hints are truncated by the node.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use ringstore_placement::HostId;

use ringstore_throttle::Throttle;

/// How replay is paced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    /// The most hint bytes asked for per delivery (a batch holds at least
    /// one hint, so it may exceed this by one hint).
    pub batch_bytes: u64,
    /// The wait after a target's first consecutive failure; it doubles with
    /// each further failure.
    pub initial_backoff: Duration,
    /// The longest wait between retries.
    pub max_backoff: Duration,
    /// The replay rate across all targets, bytes per second; `0` = unthrottled.
    pub bytes_per_second: u64,
}

impl Default for ReplayConfig {
    /// 64 KiB batches, backoff from 1 s to 60 s, 1 MiB/s (Cassandra's
    /// default `hinted_handoff_throttle`).
    fn default() -> ReplayConfig {
        ReplayConfig {
            batch_bytes: 64 << 10,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            bytes_per_second: 1 << 20,
        }
    }
}

/// What the node should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayAction {
    /// Read a batch of up to `max_bytes` of `target`'s hints and send it; then
    /// report [`ReplayScheduler::delivered`] or [`ReplayScheduler::failed`].
    Deliver {
        /// The replica to replay to.
        target: HostId,
        /// The byte budget for the batch.
        max_bytes: u64,
    },
    /// Nothing can go now; poll again at this time (on the caller's clock) at
    /// the latest, or sooner after an event.
    WaitUntil(Duration),
    /// Nothing to do until an event (a target up, a hint stored, a resume, a
    /// delivery finishing).
    Idle,
}

/// Per-target replay state.
#[derive(Clone, Copy, Debug)]
struct TargetState {
    up: bool,
    /// The bytes reserved from the throttle for the delivery in flight.
    in_flight: Option<u64>,
    /// No delivery before this time.
    retry_at: Duration,
    /// The wait after the next failure.
    next_backoff: Duration,
}

/// The replay state machine (see the module docs). Time is a [`Duration`]
/// since any fixed start the caller chooses.
#[derive(Clone, Debug)]
pub struct ReplayScheduler {
    config: ReplayConfig,
    throttle: Throttle,
    paused: bool,
    targets: BTreeMap<HostId, TargetState>,
    /// The target served last: round-robin resumes after it.
    cursor: Option<HostId>,
}

impl ReplayScheduler {
    /// A scheduler with no known targets, not paused.
    pub fn new(config: ReplayConfig, now: Duration) -> ReplayScheduler {
        ReplayScheduler {
            config,
            throttle: Throttle::new(config.bytes_per_second, now),
            paused: false,
            targets: BTreeMap::new(),
            cursor: None,
        }
    }

    /// The configuration, with the current rate.
    pub fn config(&self) -> ReplayConfig {
        ReplayConfig {
            bytes_per_second: self.throttle.rate(),
            ..self.config
        }
    }

    /// `host` is up at `now`: it may be replayed to, at once (any backoff is
    /// forgotten — this is fresh news that it is reachable).
    pub fn target_up(&mut self, host: HostId, now: Duration) {
        let initial = self.config.initial_backoff;
        let state = self.targets.entry(host).or_insert(TargetState {
            up: true,
            in_flight: None,
            retry_at: now,
            next_backoff: initial,
        });
        state.up = true;
        state.retry_at = now;
        state.next_backoff = initial;
    }

    /// `host` is down: nothing more is issued to it. A delivery in flight is
    /// still to be reported.
    pub fn target_down(&mut self, host: HostId) {
        if let Some(state) = self.targets.get_mut(&host) {
            state.up = false;
        }
    }

    /// Reconciles `host` with a snapshot of its liveness taken at `now` (the
    /// node rescans the membership view rather than trusting that it saw
    /// every up/down event): a host not known to be up that is up now is
    /// [`target_up`](ReplayScheduler::target_up); one already up keeps its
    /// backoff (a rescan is not news that it is reachable); a down host is
    /// [`target_down`](ReplayScheduler::target_down).
    pub fn set_liveness(&mut self, host: HostId, up: bool, now: Duration) {
        let known_up = self.targets.get(&host).is_some_and(|state| state.up);
        match (up, known_up) {
            (true, false) => self.target_up(host, now),
            (true, true) => {}
            (false, _) => self.target_down(host),
        }
    }

    /// Stops issuing deliveries (those in flight still finish).
    pub fn pause(&mut self) {
        self.paused = true;
    }

    /// Undoes [`pause`](ReplayScheduler::pause).
    pub fn resume(&mut self) {
        self.paused = false;
    }

    /// Whether replay is paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Changes the replay rate from `now` on; `0` = unthrottled. Takes effect
    /// for the next `poll`.
    pub fn set_rate(&mut self, bytes_per_second: u64, now: Duration) {
        self.throttle.set_rate(bytes_per_second, now);
    }

    /// Whether a delivery to `host` is in flight.
    pub fn in_flight(&self, host: HostId) -> bool {
        self.targets
            .get(&host)
            .is_some_and(|state| state.in_flight.is_some())
    }

    /// The next thing to do at `now`; `has_hints` says whether a target has
    /// hints (`|host| store.has_hints(host)`).
    pub fn poll(&mut self, now: Duration, has_hints: impl Fn(HostId) -> bool) -> ReplayAction {
        if self.paused {
            return ReplayAction::Idle;
        }
        // Round-robin: the targets after the last one served, then the rest.
        let after = self.cursor.map_or(Bound::Unbounded, Bound::Excluded);
        let wrapped = self.cursor.map(|cursor| self.targets.range(..=cursor));
        let order = self
            .targets
            .range((after, Bound::Unbounded))
            .chain(wrapped.into_iter().flatten());
        let mut wake: Option<Duration> = None;
        let mut chosen = None;
        for (host, state) in order {
            if !state.up || state.in_flight.is_some() || !has_hints(*host) {
                continue;
            }
            if state.retry_at > now {
                wake = Some(wake.map_or(state.retry_at, |at| at.min(state.retry_at)));
                continue;
            }
            chosen = Some(*host);
            break;
        }
        let Some(target) = chosen else {
            return wake.map_or(ReplayAction::Idle, ReplayAction::WaitUntil);
        };
        let max_bytes = self.config.batch_bytes;
        let ready = self.throttle.ready_at(max_bytes, now);
        if ready > now {
            return ReplayAction::WaitUntil(ready);
        }
        self.throttle.consume(max_bytes, now);
        if let Some(state) = self.targets.get_mut(&target) {
            state.in_flight = Some(max_bytes);
        }
        self.cursor = Some(target);
        ReplayAction::Deliver { target, max_bytes }
    }

    /// `target` acknowledged a batch of `bytes` at `now` (the node has
    /// deleted those hints): settles the throttle and resets the backoff.
    pub fn delivered(&mut self, target: HostId, bytes: u64, now: Duration) {
        let reserved = self.finish(target).unwrap_or(0);
        if bytes >= reserved {
            self.throttle.consume(bytes - reserved, now);
        } else {
            self.throttle.refund(reserved - bytes, now);
        }
        if let Some(state) = self.targets.get_mut(&target) {
            state.retry_at = now;
            state.next_backoff = self.config.initial_backoff;
        }
    }

    /// A delivery to `target` failed or timed out at `now`: its hints stay,
    /// and it is retried after the backoff, which doubles up to the maximum.
    pub fn failed(&mut self, target: HostId, now: Duration) {
        if let Some(reserved) = self.finish(target) {
            self.throttle.refund(reserved, now);
        }
        let max = self.config.max_backoff;
        if let Some(state) = self.targets.get_mut(&target) {
            state.retry_at = now + state.next_backoff;
            state.next_backoff = (state.next_backoff * 2).min(max);
        }
    }

    /// Ends `target`'s delivery in flight; the bytes it had reserved.
    fn finish(&mut self, target: HostId) -> Option<u64> {
        self.targets.get_mut(&target)?.in_flight.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    fn host(n: u128) -> HostId {
        HostId::from_u128(n)
    }

    fn unthrottled() -> ReplayScheduler {
        ReplayScheduler::new(
            ReplayConfig {
                bytes_per_second: 0,
                ..ReplayConfig::default()
            },
            Duration::ZERO,
        )
    }

    fn deliver_to(action: ReplayAction) -> HostId {
        match action {
            ReplayAction::Deliver { target, .. } => target,
            other => panic!("expected a delivery, got {other:?}"),
        }
    }

    #[test]
    fn backoff_doubles_caps_at_a_minute_and_resets_on_success() {
        let mut replay = unthrottled();
        let target = host(1);
        let mut now = Duration::ZERO;
        replay.target_up(target, now);
        let mut waits = Vec::new();
        for _ in 0..9 {
            deliver_to(replay.poll(now, |_| true));
            replay.failed(target, now);
            let ReplayAction::WaitUntil(at) = replay.poll(now, |_| true) else {
                panic!("a failed target must be retried later");
            };
            waits.push((at - now).as_secs());
            // Not a moment before the backoff ends.
            assert_eq!(
                replay.poll(at - Duration::from_micros(1), |_| true),
                ReplayAction::WaitUntil(at)
            );
            now = at;
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        deliver_to(replay.poll(now, |_| true));
        replay.delivered(target, 100, now);
        deliver_to(replay.poll(now, |_| true));
        replay.failed(target, now);
        assert_eq!(
            replay.poll(now, |_| true),
            ReplayAction::WaitUntil(now + SECOND)
        );
    }

    #[test]
    fn a_target_coming_back_up_is_retried_at_once() {
        let mut replay = unthrottled();
        replay.target_up(host(1), Duration::ZERO);
        deliver_to(replay.poll(Duration::ZERO, |_| true));
        replay.failed(host(1), Duration::ZERO);
        replay.target_down(host(1));
        assert_eq!(replay.poll(5 * SECOND, |_| true), ReplayAction::Idle);
        replay.target_up(host(1), 5 * SECOND);
        assert_eq!(deliver_to(replay.poll(5 * SECOND, |_| true)), host(1));
    }

    #[test]
    fn a_rescan_makes_a_target_whose_up_was_missed_deliverable_and_keeps_known_backoffs() {
        let mut replay = unthrottled();
        let now = Duration::ZERO;
        // Host 1 is known up and failing; host 2's `Up` was never seen.
        replay.target_up(host(1), now);
        deliver_to(replay.poll(now, |_| true));
        replay.failed(host(1), now);
        replay.set_liveness(host(1), true, now);
        replay.set_liveness(host(2), true, now);
        assert_eq!(deliver_to(replay.poll(now, |_| true)), host(2));
        assert_eq!(
            replay.poll(now, |_| true),
            ReplayAction::WaitUntil(SECOND),
            "host 1 keeps its backoff"
        );
        // A rescan that finds a host down stops deliveries to it.
        replay.delivered(host(2), 10, now);
        replay.set_liveness(host(2), false, now);
        replay.set_liveness(host(1), false, now);
        assert_eq!(replay.poll(5 * SECOND, |_| true), ReplayAction::Idle);
    }

    #[test]
    fn only_one_delivery_is_in_flight_per_target_and_targets_take_turns() {
        let mut replay = unthrottled();
        for n in 1..=3 {
            replay.target_up(host(n), Duration::ZERO);
        }
        let now = Duration::ZERO;
        let served: Vec<HostId> = (0..3)
            .map(|_| deliver_to(replay.poll(now, |_| true)))
            .collect();
        assert_eq!(served, [host(1), host(2), host(3)]);
        assert!((1..=3).all(|n| replay.in_flight(host(n))));
        assert_eq!(replay.poll(now, |_| true), ReplayAction::Idle);
        replay.delivered(host(2), 10, now);
        replay.delivered(host(1), 10, now);
        // Round-robin resumes after host 3, the last served.
        assert_eq!(deliver_to(replay.poll(now, |_| true)), host(1));
        assert_eq!(deliver_to(replay.poll(now, |_| true)), host(2));
    }

    #[test]
    fn nothing_is_issued_while_paused_or_to_down_targets_or_targets_without_hints() {
        let mut replay = unthrottled();
        let now = Duration::ZERO;
        replay.target_up(host(1), now);
        replay.target_up(host(2), now);
        replay.target_down(host(2));
        replay.pause();
        assert!(replay.is_paused());
        assert_eq!(replay.poll(now, |_| true), ReplayAction::Idle);
        replay.resume();
        assert_eq!(replay.poll(now, |h| h != host(1)), ReplayAction::Idle);
        assert_eq!(deliver_to(replay.poll(now, |_| true)), host(1));
        assert_eq!(replay.poll(now, |_| true), ReplayAction::Idle);
    }

    #[test]
    fn a_delivery_waits_for_the_throttle_and_reserves_its_budget() {
        let config = ReplayConfig {
            batch_bytes: 100_000,
            bytes_per_second: 1_000_000, // bucket: 100 kB
            ..ReplayConfig::default()
        };
        let mut replay = ReplayScheduler::new(config, Duration::ZERO);
        replay.target_up(host(1), Duration::ZERO);
        replay.target_up(host(2), Duration::ZERO);
        deliver_to(replay.poll(Duration::ZERO, |_| true));
        // The first delivery's reservation emptied the bucket.
        assert_eq!(
            replay.poll(Duration::ZERO, |_| true),
            ReplayAction::WaitUntil(Duration::from_millis(100))
        );
        // Only 50 kB were sent: half the reservation comes back.
        replay.delivered(host(1), 50_000, Duration::ZERO);
        assert_eq!(
            replay.poll(Duration::ZERO, |_| true),
            ReplayAction::WaitUntil(Duration::from_millis(50))
        );
        assert_eq!(
            deliver_to(replay.poll(Duration::from_millis(50), |_| true)),
            host(2)
        );
    }
}
