//! Counting one write's acks until its consistency level is met or cannot be.
//!
//! The node sends the mutation to every target of a [`WritePlan`], then feeds
//! each reply to a [`WriteTracker`]: [`on_ack`](WriteTracker::on_ack) or
//! [`on_failure`](WriteTracker::on_failure). The tracker answers with the
//! write's [`WriteStatus`]; the node replies to the client on the first
//! `Satisfied` or `Failed`, and on its own deadline builds a [`WriteTimeout`]
//! with [`WriteTracker::timeout`].
//!
//! Acks are counted per quota of the plan's [`Requirement`]: for `LOCAL_*`
//! under NTS only local acks count, for `EACH_QUORUM` each DC is counted on
//! its own (Cassandra's `DatacenterWriteResponseHandler` and
//! `DatacenterSyncWriteResponseHandler`). Replies keep arriving after the
//! client was answered; the node keeps feeding them (or drops the tracker).
//!
//! # Invariants
//! - The status moves `Pending → Satisfied` or `Pending → Failed` at most
//!   once and then stays: a late failure cannot undo success.
//! - `Failed` is reported as soon as the targets that have not failed can no
//!   longer meet the requirement, not at the deadline.
//! - Each target counts once: duplicate replies, and replies from hosts that
//!   are not targets, are ignored.
//!
//! # Caveats
//! - At `ANY`, a hint the coordinator stored counts as the ack
//!   ([`WriteTracker::on_hint_stored`]), so `ANY` never fails early: the node
//!   must store hints for failed and down replicas, or the write times out.
//! - A timeout is indeterminate: replicas may still apply the write, and a
//!   later read may see it. Clients retry with the same timestamp, which is
//!   idempotent under last-write-wins.

use std::fmt;

use ringstore_placement::{Datacenter, HostId};

use crate::consistency::ConsistencyLevel;
use crate::plan::WritePlan;
use crate::requirement::Requirement;

/// Where a write stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteStatus {
    /// Not enough acks yet, and enough targets may still ack.
    Pending,
    /// The level is met: answer the client with success.
    Satisfied,
    /// Too many targets failed for the level to be met: answer with an error.
    /// Replicas that acked keep the write (there is no rollback).
    Failed,
}

/// A write whose level was not met before the coordinator's deadline.
/// Indeterminate: the write may still be applied by some replicas.
/// Cassandra's `WriteTimeoutException`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct WriteTimeout {
    /// The level asked for.
    pub level: ConsistencyLevel,
    /// Acks that counted toward the level (each DC's capped at its quota).
    pub acked: u32,
    /// Acks needed, pending replicas included.
    pub required: u32,
}

impl fmt::Display for WriteTimeout {
    /// `write timed out at consistency level QUORUM: 1 of 2 required acks
    /// received; the write may still be applied`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "write timed out at consistency level {}: {} of {} required acks received; \
             the write may still be applied",
            self.level, self.acked, self.required
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Waiting,
    Acked,
    Failed,
}

#[derive(Clone, Debug)]
struct Target {
    host: HostId,
    dc: Datacenter,
    reply: Reply,
}

/// The ack count of one write. Built from its [`WritePlan`].
#[derive(Clone, Debug)]
pub struct WriteTracker {
    level: ConsistencyLevel,
    requirement: Requirement,
    targets: Vec<Target>,
    hint_stored: bool,
    status: WriteStatus,
}

impl WriteTracker {
    /// A tracker waiting for every target of `plan`.
    pub fn new(plan: &WritePlan) -> WriteTracker {
        let targets = plan
            .targets()
            .iter()
            .map(|t| Target {
                host: t.host,
                dc: t.dc.clone(),
                reply: Reply::Waiting,
            })
            .collect();
        WriteTracker {
            level: plan.level(),
            requirement: plan.requirement().clone(),
            targets,
            hint_stored: false,
            status: WriteStatus::Pending,
        }
    }

    /// `host` applied the write.
    pub fn on_ack(&mut self, host: HostId) -> WriteStatus {
        self.record(host, Reply::Acked)
    }

    /// `host` reported an error, or the node gave up on it (connection lost).
    pub fn on_failure(&mut self, host: HostId) -> WriteStatus {
        self.record(host, Reply::Failed)
    }

    /// The coordinator stored a hint for a replica. Satisfies an `ANY` write;
    /// no effect at other levels (hints do not count toward them).
    pub fn on_hint_stored(&mut self) -> WriteStatus {
        if self.level == ConsistencyLevel::Any {
            self.hint_stored = true;
        }
        self.evaluate()
    }

    /// Where the write stands.
    pub fn status(&self) -> WriteStatus {
        self.status
    }

    /// Acks that count toward the level, each quota's capped at its count
    /// (so surplus acks in one DC do not hide a shortfall in another); at
    /// `ANY` a stored hint counts as one.
    pub fn acked(&self) -> u32 {
        let acked = self.credited(|reply| reply == Reply::Acked);
        if self.hint_stored {
            acked.max(1)
        } else {
            acked
        }
    }

    /// Acks needed, pending replicas included.
    pub fn required(&self) -> u32 {
        self.requirement.total()
    }

    /// The level asked for.
    pub fn level(&self) -> ConsistencyLevel {
        self.level
    }

    /// The error to return when the node's deadline passes before the write
    /// is satisfied.
    pub fn timeout(&self) -> WriteTimeout {
        WriteTimeout {
            level: self.level,
            acked: self.acked(),
            required: self.required(),
        }
    }

    fn record(&mut self, host: HostId, reply: Reply) -> WriteStatus {
        if let Some(target) = self
            .targets
            .iter_mut()
            .find(|t| t.host == host && t.reply == Reply::Waiting)
        {
            target.reply = reply;
        }
        self.evaluate()
    }

    fn credited(&self, counts: impl Fn(Reply) -> bool) -> u32 {
        let dcs = self
            .targets
            .iter()
            .filter(|t| counts(t.reply))
            .map(|t| &t.dc);
        self.requirement.credited(dcs)
    }

    fn evaluate(&mut self) -> WriteStatus {
        if self.status != WriteStatus::Pending {
            return self.status;
        }
        let total = self.requirement.total();
        if self.acked() >= total {
            self.status = WriteStatus::Satisfied;
        } else if self.level != ConsistencyLevel::Any
            && self.credited(|reply| reply != Reply::Failed) < total
        {
            self.status = WriteStatus::Failed;
        }
        self.status
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::plan_write;
    use crate::testkit::{
        SIMPLE_RF3_COUNTS, dc, host, nts_3_2, nts_replicas, replica, scenarios, simple_3,
        simple_replicas,
    };
    use ConsistencyLevel::*;
    use proptest::prelude::*;

    fn tracker(level: ConsistencyLevel, nts: bool) -> WriteTracker {
        let plan = if nts {
            plan_write(level, &nts_3_2(), &dc("dc1"), &nts_replicas(&[]), &[])
        } else {
            plan_write(level, &simple_3(), &dc("dc1"), &simple_replicas(&[]), &[])
        };
        WriteTracker::new(&plan.unwrap())
    }

    #[test]
    fn quorum_on_simple_rf3_is_satisfied_by_the_second_ack() {
        let mut t = tracker(Quorum, false);
        assert_eq!(t.on_ack(host(3)), WriteStatus::Pending);
        assert_eq!(t.acked(), 1);
        assert_eq!(t.on_ack(host(1)), WriteStatus::Satisfied);
        assert_eq!(t.on_failure(host(2)), WriteStatus::Satisfied);
        assert_eq!(t.acked(), 2);
        assert_eq!(t.required(), 2);
    }

    #[test]
    fn a_write_fails_as_soon_as_the_level_became_impossible() {
        let mut t = tracker(Quorum, false);
        assert_eq!(t.on_failure(host(1)), WriteStatus::Pending);
        assert_eq!(t.on_failure(host(2)), WriteStatus::Failed);
        assert_eq!(t.on_ack(host(3)), WriteStatus::Failed);
        let mut all = tracker(All, false);
        assert_eq!(all.on_ack(host(1)), WriteStatus::Pending);
        assert_eq!(all.on_failure(host(2)), WriteStatus::Failed);
    }

    #[test]
    fn duplicate_and_unknown_replies_are_ignored() {
        let mut t = tracker(Quorum, false);
        assert_eq!(t.on_ack(host(1)), WriteStatus::Pending);
        assert_eq!(t.on_ack(host(1)), WriteStatus::Pending);
        assert_eq!(t.on_failure(host(1)), WriteStatus::Pending);
        assert_eq!(t.on_ack(host(99)), WriteStatus::Pending);
        assert_eq!(t.acked(), 1);
        assert_eq!(t.on_ack(host(2)), WriteStatus::Satisfied);
    }

    #[test]
    fn each_level_on_simple_rf3_is_satisfied_after_its_count_of_acks() {
        for (level, needed) in SIMPLE_RF3_COUNTS {
            let mut t = tracker(level, false);
            for n in 1..u128::from(needed) {
                assert_eq!(t.on_ack(host(n)), WriteStatus::Pending, "{level}");
            }
            assert_eq!(
                t.on_ack(host(needed.into())),
                WriteStatus::Satisfied,
                "{level}"
            );
        }
    }

    #[test]
    fn local_quorum_on_nts_counts_only_local_acks() {
        let mut t = tracker(LocalQuorum, true);
        assert_eq!(t.on_ack(host(4)), WriteStatus::Pending);
        assert_eq!(t.on_ack(host(5)), WriteStatus::Pending);
        assert_eq!(t.acked(), 0);
        assert_eq!(t.on_ack(host(1)), WriteStatus::Pending);
        assert_eq!(t.on_ack(host(3)), WriteStatus::Satisfied);
        let mut t = tracker(LocalQuorum, true);
        assert_eq!(t.on_failure(host(1)), WriteStatus::Pending);
        assert_eq!(t.on_failure(host(2)), WriteStatus::Failed);
    }

    #[test]
    fn local_one_on_nts_fails_when_every_local_replica_failed() {
        let mut t = tracker(LocalOne, true);
        for n in [1, 2] {
            assert_eq!(t.on_failure(host(n)), WriteStatus::Pending);
        }
        assert_eq!(t.on_ack(host(4)), WriteStatus::Pending);
        assert_eq!(t.on_failure(host(3)), WriteStatus::Failed);
    }

    #[test]
    fn each_quorum_on_nts_needs_a_quorum_in_both_dcs() {
        let mut t = tracker(EachQuorum, true);
        for n in [1, 2, 3] {
            assert_eq!(t.on_ack(host(n)), WriteStatus::Pending);
        }
        assert_eq!(t.acked(), 2);
        assert_eq!(t.on_ack(host(4)), WriteStatus::Pending);
        assert_eq!(
            t.timeout().to_string(),
            "write timed out at consistency level EACH_QUORUM: 3 of 4 required acks received; \
             the write may still be applied"
        );
        assert_eq!(t.on_ack(host(5)), WriteStatus::Satisfied);
        let mut t = tracker(EachQuorum, true);
        assert_eq!(t.on_failure(host(5)), WriteStatus::Failed);
    }

    #[test]
    fn the_other_levels_on_nts_count_acks_from_anywhere() {
        for (level, needed) in [
            (One, 1),
            (Two, 2),
            (Three, 3),
            (Quorum, 3),
            (All, 5),
            (Any, 1),
        ] {
            let mut t = tracker(level, true);
            let order = [5, 4, 3, 2, 1];
            for &n in &order[..needed - 1] {
                assert_eq!(t.on_ack(host(n)), WriteStatus::Pending, "{level}");
            }
            assert_eq!(
                t.on_ack(host(order[needed - 1])),
                WriteStatus::Satisfied,
                "{level}"
            );
        }
    }

    #[test]
    fn pending_replicas_raise_the_count_of_acks_needed() {
        let pending = [replica(9, "dc1", true)];
        let plan = plan_write(
            Quorum,
            &simple_3(),
            &dc("dc1"),
            &simple_replicas(&[]),
            &pending,
        );
        let mut t = WriteTracker::new(&plan.unwrap());
        assert_eq!(t.on_ack(host(1)), WriteStatus::Pending);
        assert_eq!(t.on_ack(host(2)), WriteStatus::Pending);
        assert_eq!(t.on_ack(host(9)), WriteStatus::Satisfied);
    }

    #[test]
    fn any_with_every_replica_down_is_satisfied_by_a_stored_hint() {
        let plan = plan_write(
            Any,
            &simple_3(),
            &dc("dc1"),
            &simple_replicas(&[1, 2, 3]),
            &[],
        );
        let mut t = WriteTracker::new(&plan.unwrap());
        assert_eq!(t.status(), WriteStatus::Pending);
        assert_eq!(t.acked(), 0);
        assert_eq!(t.on_hint_stored(), WriteStatus::Satisfied);
        assert_eq!(t.acked(), 1);
    }

    #[test]
    fn any_never_fails_early_and_hints_do_not_count_at_other_levels() {
        let mut any = tracker(Any, false);
        for n in 1..=3 {
            assert_eq!(any.on_failure(host(n)), WriteStatus::Pending);
        }
        assert_eq!(any.on_hint_stored(), WriteStatus::Satisfied);
        let mut one = tracker(One, false);
        assert_eq!(one.on_hint_stored(), WriteStatus::Pending);
        assert_eq!(one.acked(), 0);
    }

    #[test]
    fn a_timeout_reports_the_level_and_counts() {
        let mut t = tracker(Quorum, false);
        t.on_ack(host(1));
        let timeout = t.timeout();
        assert_eq!(
            timeout,
            WriteTimeout {
                level: Quorum,
                acked: 1,
                required: 2
            }
        );
        assert_eq!(
            timeout.to_string(),
            "write timed out at consistency level QUORUM: 1 of 2 required acks received; \
             the write may still be applied"
        );
    }

    proptest! {
        #[test]
        fn the_status_is_satisfied_exactly_when_acks_meet_the_requirement_and_failed_exactly_when_they_cannot(
            level in proptest::sample::select(ConsistencyLevel::ALL_LEVELS.to_vec()),
            s in scenarios(),
            replies in proptest::collection::vec((0usize..8, any::<bool>()), 0..12),
        ) {
            let Ok(plan) = plan_write(level, &s.strategy, &s.local_dc, &s.natural, &s.pending) else {
                return Ok(());
            };
            let mut t = WriteTracker::new(&plan);
            let targets = plan.targets();
            let mut acked: Vec<&Datacenter> = Vec::new();
            let mut open: Vec<HostId> = targets.iter().map(|t| t.host).collect();
            let mut expected = WriteStatus::Pending;
            for (index, ack) in replies {
                let Some(target) = targets.get(index) else { continue };
                let status = if ack { t.on_ack(target.host) } else { t.on_failure(target.host) };
                if let Some(pos) = open.iter().position(|&h| h == target.host) {
                    open.remove(pos);
                    if ack {
                        acked.push(&target.dc);
                    }
                }
                if expected == WriteStatus::Pending {
                    let possible = acked.iter().copied().chain(
                        targets.iter().filter(|t| open.contains(&t.host)).map(|t| &t.dc));
                    if plan.requirement().is_met_by(acked.iter().copied()) {
                        expected = WriteStatus::Satisfied;
                    } else if level != Any && !plan.requirement().is_met_by(possible) {
                        expected = WriteStatus::Failed;
                    }
                }
                prop_assert_eq!(status, expected);
                prop_assert!(t.acked() <= t.required());
            }
        }
    }
}
