//! Clock offsets between members, estimated from probe round trips, and the
//! majority rule that says whether this node's clock is too far off.
//!
//! A node sends live peers (a few random ones each interval) a probe
//! carrying its wall time `t0`; the peer answers at once with an echo
//! carrying `t0` back and its own wall time `t1`; the echo arrives at
//! `t0 + rtt` (the round trip measured on the monotonic clock). The peer
//! read its clock somewhere within the round trip, so its offset is
//! `t1 - (t0 + rtt / 2)`, within `± rtt / 2` — the NTP and CockroachDB
//! `RemoteClockMonitor` estimate. Of the last [`SAMPLES_KEPT`]
//! samples of a peer that are younger than [`MAX_SAMPLE_AGE`], the one with
//! the smallest round trip is the estimate: a delayed packet only widens its
//! own sample's uncertainty, and loses to a faster one.
//!
//! A new sample that contradicts an older one (their `± rtt / 2` intervals
//! do not overlap) means a clock stepped in between: the older samples it
//! contradicts are dropped, so the step counts from the first probe after
//! it, not once the older samples have aged out of the window (the
//! whole-cluster simulation saw a 3.6 s jump go unnoticed for over 4 s).
//!
//! An echo counts only if it answers the probe outstanding to that peer (same
//! `t0`): a duplicate, a replayed or an unsolicited echo is ignored.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use ringstore_placement::HostId;

use crate::clock::WallTime;

/// How many recent samples are kept per peer.
pub const SAMPLES_KEPT: usize = 5;
/// Samples older than this are not used.
pub const MAX_SAMPLE_AGE: Duration = Duration::from_secs(30);
/// An echo arriving later than this after its probe is ignored (its
/// uncertainty would exceed any useful bound).
pub const MAX_ROUND_TRIP: Duration = Duration::from_secs(5);

/// One measurement of a peer's clock against this node's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetSample {
    /// The peer's clock minus this node's, in microseconds (positive: the
    /// peer's clock is ahead).
    pub offset_micros: i64,
    /// The probe's round trip in microseconds; the offset is known to within
    /// half of it.
    pub rtt_micros: i64,
    /// When it was taken, on the monotonic clock.
    pub taken: Duration,
}

impl OffsetSample {
    /// Whether both samples may be right: their intervals of `± rtt / 2`
    /// around the offset overlap. If not, a clock stepped between them.
    fn agrees_with(&self, other: &OffsetSample) -> bool {
        let apart = self.offset_micros.abs_diff(other.offset_micros);
        let slack = (self.rtt_micros.saturating_add(other.rtt_micros) / 2).unsigned_abs();
        apart <= slack
    }
}

/// The estimated offset of one peer's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerOffset {
    /// The peer's clock minus this node's, in microseconds.
    pub offset_micros: i64,
    /// How far the true offset may be from `offset_micros` (half the round
    /// trip of the sample used), in microseconds.
    pub uncertainty_micros: i64,
}

impl PeerOffset {
    /// Whether the offset is certainly beyond `bound`: even at the near end
    /// of its uncertainty.
    pub fn exceeds(&self, bound: Duration) -> bool {
        let bound = i64::try_from(bound.as_micros()).unwrap_or(i64::MAX);
        self.offset_micros
            .saturating_abs()
            .saturating_sub(self.uncertainty_micros)
            > bound
    }
}

/// Whether this node's clock agrees with the cluster's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockVerdict {
    /// No majority of the live members is further than the bound from this
    /// node (always so for a node that has no estimate of anyone yet).
    Within {
        /// This node's clock minus the median of the live members' clocks
        /// (this node's included), in microseconds.
        offset_micros: i64,
    },
    /// More than half of the live members (this node counted as one that
    /// agrees with itself) are further than the bound from this node: its
    /// clock is the one that is off, and it must not stamp writes.
    Skewed {
        /// This node's clock minus the median of the live members' clocks,
        /// in microseconds.
        offset_micros: i64,
        /// How many live peers are further than the bound.
        beyond: usize,
        /// How many live members were compared: the peers with an estimate,
        /// plus this node.
        members: usize,
    },
}

impl ClockVerdict {
    /// Whether the node's clock is off from the majority.
    pub fn is_skewed(&self) -> bool {
        matches!(self, ClockVerdict::Skewed { .. })
    }

    /// This node's clock minus the median of the live members', in
    /// microseconds.
    pub fn offset_micros(&self) -> i64 {
        match *self {
            ClockVerdict::Within { offset_micros } | ClockVerdict::Skewed { offset_micros, .. } => {
                offset_micros
            }
        }
    }
}

/// What a node knows of its peers' clocks: shared as `Arc`, replaced whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClockReport {
    /// The bound, `max_clock_offset`.
    pub max_offset: Duration,
    /// The estimate of every live peer that has a recent sample.
    pub peers: BTreeMap<HostId, PeerOffset>,
    /// The majority rule's verdict on this node's clock.
    pub verdict: ClockVerdict,
}

impl ClockReport {
    /// The report of a node that has measured nobody yet.
    pub fn empty(max_offset: Duration) -> ClockReport {
        ClockReport {
            max_offset,
            peers: BTreeMap::new(),
            verdict: ClockVerdict::Within { offset_micros: 0 },
        }
    }
}

/// The majority rule over the estimates of the live peers. The node counts
/// itself as one member that agrees with its own clock, so one peer alone
/// never outvotes it (in a two-node cluster neither refuses; see the crate's
/// caveats), and peers without an estimate (not measured yet, or running a
/// version without clock probes) have no vote.
pub fn judge(peers: &BTreeMap<HostId, PeerOffset>, max_offset: Duration) -> ClockVerdict {
    let members = peers.len() + 1;
    let beyond = peers.values().filter(|p| p.exceeds(max_offset)).count();
    let mut offsets: Vec<i64> = peers.values().map(|p| p.offset_micros).collect();
    offsets.push(0);
    offsets.sort_unstable();
    // The lower median, so an even count leans towards this node's clock.
    let median = offsets[(offsets.len() - 1) / 2];
    let offset_micros = median.saturating_neg();
    if 2 * beyond > members {
        ClockVerdict::Skewed {
            offset_micros,
            beyond,
            members,
        }
    } else {
        ClockVerdict::Within { offset_micros }
    }
}

/// A probe sent and not answered yet.
#[derive(Clone, Copy, Debug)]
struct Outstanding {
    sent_wall: WallTime,
    sent: Duration,
}

/// The per-peer samples and outstanding probes of one node.
#[derive(Debug, Default)]
pub struct OffsetEstimator {
    samples: BTreeMap<HostId, VecDeque<OffsetSample>>,
    outstanding: BTreeMap<HostId, Outstanding>,
}

impl OffsetEstimator {
    /// Notes a probe sent to `peer` at wall time `sent_wall` (monotonic
    /// `sent`); it replaces an older unanswered one.
    pub fn probe_sent(&mut self, peer: HostId, sent_wall: WallTime, sent: Duration) {
        self.outstanding
            .insert(peer, Outstanding { sent_wall, sent });
    }

    /// Takes an echo from `peer` of the probe sent at `probe_sent_at`,
    /// answered at the peer's wall time `replied_at`, received at monotonic
    /// `now`. Returns the sample, or `None` if the echo answers no
    /// outstanding probe or came too late.
    pub fn echo_received(
        &mut self,
        peer: HostId,
        probe_sent_at: WallTime,
        replied_at: WallTime,
        now: Duration,
    ) -> Option<OffsetSample> {
        let probe = *self.outstanding.get(&peer)?;
        if probe.sent_wall != probe_sent_at {
            return None;
        }
        self.outstanding.remove(&peer);
        let rtt = now.checked_sub(probe.sent)?;
        if rtt > MAX_ROUND_TRIP {
            return None;
        }
        let rtt_micros = i64::try_from(rtt.as_micros()).unwrap_or(i64::MAX);
        let midpoint = probe.sent_wall.0.saturating_add(rtt_micros / 2);
        let sample = OffsetSample {
            offset_micros: replied_at.0.saturating_sub(midpoint),
            rtt_micros,
            taken: now,
        };
        let samples = self.samples.entry(peer).or_default();
        samples.retain(|old| old.agrees_with(&sample));
        if samples.len() == SAMPLES_KEPT {
            samples.pop_front();
        }
        samples.push_back(sample);
        Some(sample)
    }

    /// The estimate of `peer` at monotonic `now`: the recent sample with the
    /// smallest round trip.
    pub fn estimate(&self, peer: HostId, now: Duration) -> Option<PeerOffset> {
        self.samples
            .get(&peer)?
            .iter()
            .filter(|s| now.saturating_sub(s.taken) <= MAX_SAMPLE_AGE)
            .min_by_key(|s| s.rtt_micros)
            .map(|s| PeerOffset {
                offset_micros: s.offset_micros,
                uncertainty_micros: s.rtt_micros.saturating_add(1) / 2,
            })
    }

    /// Forgets the peers not in `keep` (members that left or were removed).
    pub fn retain(&mut self, keep: impl Fn(HostId) -> bool) {
        self.samples.retain(|&h, _| keep(h));
        self.outstanding.retain(|&h, _| keep(h));
    }

    /// The report over `live` peers at monotonic `now`.
    pub fn report(
        &self,
        live: impl Iterator<Item = HostId>,
        now: Duration,
        max_offset: Duration,
    ) -> ClockReport {
        let peers: BTreeMap<HostId, PeerOffset> = live
            .filter_map(|h| self.estimate(h, now).map(|e| (h, e)))
            .collect();
        let verdict = judge(&peers, max_offset);
        ClockReport {
            max_offset,
            peers,
            verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(500);
    const MS: i64 = 1000;

    fn host(n: u128) -> HostId {
        HostId::from_u128(n)
    }

    fn offsets(values_ms: &[i64]) -> BTreeMap<HostId, PeerOffset> {
        values_ms
            .iter()
            .enumerate()
            .map(|(i, &ms)| {
                (
                    host(i as u128 + 2),
                    PeerOffset {
                        offset_micros: ms * MS,
                        uncertainty_micros: MS,
                    },
                )
            })
            .collect()
    }

    /// A peer 2 s ahead, probed with a 10 ms round trip split `out`/`back`.
    fn exchange(
        estimator: &mut OffsetEstimator,
        start: Duration,
        out: Duration,
        back: Duration,
    ) -> Option<OffsetSample> {
        let local_wall = |at: Duration| WallTime(1_000_000_000 + at.as_micros() as i64);
        let peer_wall = |at: Duration| WallTime(local_wall(at).0 + 2_000 * MS);
        estimator.probe_sent(host(2), local_wall(start), start);
        let replied = peer_wall(start + out);
        estimator.echo_received(host(2), local_wall(start), replied, start + out + back)
    }

    #[test]
    fn an_offset_is_found_within_half_the_round_trip_whatever_the_asymmetry() {
        for (out, back) in [(5, 5), (1, 9), (9, 1), (0, 10)] {
            let mut estimator = OffsetEstimator::default();
            let sample = exchange(
                &mut estimator,
                Duration::from_secs(1),
                Duration::from_millis(out),
                Duration::from_millis(back),
            )
            .unwrap();
            assert_eq!(sample.rtt_micros, 10 * MS);
            let error = (sample.offset_micros - 2_000 * MS).abs();
            assert!(error <= 5 * MS, "{out}/{back}: off by {error} µs");
            let estimate = estimator.estimate(host(2), Duration::from_secs(2)).unwrap();
            assert!((estimate.offset_micros - 2_000 * MS).abs() <= estimate.uncertainty_micros);
        }
    }

    #[test]
    fn the_fastest_recent_sample_wins_and_old_ones_expire() {
        let mut estimator = OffsetEstimator::default();
        let ms = Duration::from_millis;
        // A slow, lopsided exchange (err ~ 45 ms) and a fast one (err 0).
        exchange(&mut estimator, ms(1000), ms(0), ms(90)).unwrap();
        exchange(&mut estimator, ms(2000), ms(1), ms(1)).unwrap();
        let estimate = estimator.estimate(host(2), ms(2100)).unwrap();
        assert_eq!(estimate.offset_micros, 2_000 * MS);
        assert_eq!(estimate.uncertainty_micros, MS);
        assert!(
            estimator
                .estimate(host(2), ms(2002) + MAX_SAMPLE_AGE + ms(1))
                .is_none(),
            "every sample too old"
        );
        for i in 0..SAMPLES_KEPT as u64 {
            exchange(&mut estimator, ms(3000 + 100 * i), ms(20), ms(20)).unwrap();
        }
        let estimate = estimator.estimate(host(2), ms(4000)).unwrap();
        assert_eq!(estimate.uncertainty_micros, 20 * MS, "only the last kept");
    }

    #[test]
    fn a_clock_step_counts_from_the_first_probe_after_it() {
        let mut estimator = OffsetEstimator::default();
        let ms = Duration::from_millis;
        let local_wall = |at: Duration| WallTime(1_000_000_000 + at.as_micros() as i64);
        // Four fast probes of a peer in step (1 ms round trips)...
        for i in 0..4u64 {
            let at = ms(1000 * (i + 1));
            estimator.probe_sent(host(2), local_wall(at), at);
            estimator
                .echo_received(
                    host(2),
                    local_wall(at),
                    local_wall(at + ms(1) / 2),
                    at + ms(1),
                )
                .unwrap();
        }
        // ...then its clock jumps 3 s ahead, and one slower probe (4 ms)
        // sees it: the older, faster samples contradict it and go.
        let at = ms(5000);
        estimator.probe_sent(host(2), local_wall(at), at);
        let replied = WallTime(local_wall(at + ms(2)).0 + 3_000 * MS);
        estimator
            .echo_received(host(2), local_wall(at), replied, at + ms(4))
            .unwrap();
        let estimate = estimator.estimate(host(2), at + ms(4)).unwrap();
        assert_eq!(estimate.offset_micros, 3_000 * MS);
        assert!(
            judge(
                &BTreeMap::from([(host(2), estimate), (host(3), estimate)]),
                BOUND
            )
            .is_skewed()
        );
    }

    #[test]
    fn unsolicited_duplicate_and_late_echoes_are_ignored() {
        let mut estimator = OffsetEstimator::default();
        let now = Duration::from_secs(10);
        assert!(
            estimator
                .echo_received(host(2), WallTime(5), WallTime(9), now)
                .is_none(),
            "nothing was sent"
        );
        estimator.probe_sent(host(2), WallTime(5), now);
        assert!(
            estimator
                .echo_received(host(2), WallTime(6), WallTime(9), now)
                .is_none(),
            "another probe's echo"
        );
        assert!(
            estimator
                .echo_received(host(3), WallTime(5), WallTime(9), now)
                .is_none(),
            "from another peer"
        );
        assert!(
            estimator
                .echo_received(host(2), WallTime(5), WallTime(9), now)
                .is_some()
        );
        assert!(
            estimator
                .echo_received(host(2), WallTime(5), WallTime(9), now)
                .is_none(),
            "a duplicate"
        );
        estimator.probe_sent(host(2), WallTime(7), now);
        let late = now + MAX_ROUND_TRIP + Duration::from_millis(1);
        assert!(
            estimator
                .echo_received(host(2), WallTime(7), WallTime(9), late)
                .is_none()
        );
    }

    #[test]
    fn a_node_off_from_the_majority_is_skewed_and_the_others_are_not() {
        // Five nodes, one 2 s ahead: it sees four peers 2 s behind.
        let verdict = judge(&offsets(&[-2000, -2000, -2001, -1999]), BOUND);
        assert_eq!(
            verdict,
            ClockVerdict::Skewed {
                offset_micros: 2000 * MS,
                beyond: 4,
                members: 5
            }
        );
        // A good node sees one peer 2 s ahead and three close.
        let verdict = judge(&offsets(&[2000, 1, -2, 0]), BOUND);
        assert!(!verdict.is_skewed());
        assert_eq!(verdict.offset_micros(), 0);
        // Within the bound nobody is skewed, however many peers.
        assert!(!judge(&offsets(&[400, 450, -400, 300]), BOUND).is_skewed());
    }

    #[test]
    fn the_majority_counts_the_node_itself_and_only_peers_with_an_estimate() {
        assert!(!judge(&offsets(&[]), BOUND).is_skewed(), "alone");
        assert!(
            !judge(&offsets(&[3000]), BOUND).is_skewed(),
            "one peer cannot outvote a node"
        );
        assert!(judge(&offsets(&[3000, 3000]), BOUND).is_skewed(), "2 of 3");
        assert!(
            !judge(&offsets(&[3000, 3000, 0]), BOUND).is_skewed(),
            "2 of 4 is no majority"
        );
        assert!(judge(&offsets(&[3000, -3000, 3000, 0]), BOUND).is_skewed());
    }

    #[test]
    fn an_offset_within_its_uncertainty_of_the_bound_does_not_count() {
        let close = PeerOffset {
            offset_micros: 520 * MS,
            uncertainty_micros: 30 * MS,
        };
        assert!(!close.exceeds(BOUND));
        let far = PeerOffset {
            offset_micros: -520 * MS,
            uncertainty_micros: 10 * MS,
        };
        assert!(far.exceeds(BOUND));
        let extreme = PeerOffset {
            offset_micros: i64::MIN,
            uncertainty_micros: 0,
        };
        assert!(extreme.exceeds(BOUND), "no overflow");
    }
}
