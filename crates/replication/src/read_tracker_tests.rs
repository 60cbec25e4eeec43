//! Tests of [`ReadTracker`]: scripted reads on the reference keyspaces, then a
//! simulated cluster that answers, fails or stays silent at random.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use ringstore_placement::ReplicationStrategy;

use super::*;
use crate::plan::{ReplicaCandidate, plan_read};
use crate::read_repair::RepairAction;
use crate::testkit::{
    Scenario, dc, host, nts_3_2, nts_replicas, scenarios, simple_3, simple_replicas,
};
use ConsistencyLevel::*;

const NOW: Timestamp = Timestamp(100);

fn live(ts: i64, value: &str) -> Cell {
    Cell::live(Timestamp(ts), value.as_bytes().to_vec())
}

fn digest(cell: &Cell) -> Digest {
    Digest::of(Some(cell))
}

fn plan(
    level: ConsistencyLevel,
    strategy: &ReplicationStrategy,
    natural: &[ReplicaCandidate],
) -> ReadPlan {
    plan_read(level, strategy, &dc("dc1"), natural).unwrap()
}

fn tracker(level: ConsistencyLevel, natural: &[ReplicaCandidate]) -> ReadTracker {
    ReadTracker::new(&plan(level, &simple_3(), natural))
}

fn done(winner: Option<Cell>, repairs: Vec<(HostId, Cell)>, digest_mismatch: bool) -> ReadAction {
    ReadAction::Done(ReadOutcome {
        winner,
        repairs,
        digest_mismatch,
    })
}

#[test]
fn agreeing_digests_finish_the_read_without_repairs() {
    let cell = live(5, "v");
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    assert_eq!(t.on_digest(host(2), digest(&cell)), ReadAction::Wait);
    assert_eq!(
        t.on_data(host(1), Some(cell.clone())),
        done(Some(cell), vec![], false)
    );
    assert!(t.is_finished());
}

#[test]
fn every_level_finishes_after_its_required_answers_when_replicas_agree() {
    let cell = live(5, "v");
    let cases = [
        (simple_3(), simple_replicas(&[])),
        (nts_3_2(), nts_replicas(&[])),
    ];
    for (strategy, natural) in cases {
        for level in ConsistencyLevel::ALL_LEVELS
            .into_iter()
            .filter(|l| l.is_valid_for_reads())
        {
            let plan = plan(level, &strategy, &natural);
            let mut t = ReadTracker::new(&plan);
            for &h in plan.digests_from() {
                assert_eq!(t.on_digest(h, digest(&cell)), ReadAction::Wait, "{level}");
            }
            let action = t.on_data(plan.data_from(), Some(cell.clone()));
            assert_eq!(action, done(Some(cell.clone()), vec![], false), "{level}");
            assert_eq!(t.required() as usize, 1 + plan.digests_from().len());
        }
    }
}

#[test]
fn a_digest_mismatch_gathers_data_and_repairs_the_stale_replica() {
    let (new, old) = (live(6, "new"), live(5, "old"));
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    assert_eq!(t.on_data(host(1), Some(new.clone())), ReadAction::Wait);
    assert_eq!(
        t.on_digest(host(2), digest(&old)),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(
        t.on_data(host(2), Some(old)),
        done(Some(new.clone()), vec![(host(2), new)], true)
    );
}

#[test]
fn the_newer_cell_wins_even_when_it_came_as_a_digest() {
    let (new, old) = (live(6, "new"), live(5, "old"));
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    t.on_digest(host(2), digest(&new));
    assert_eq!(
        t.on_data(host(1), Some(old)),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(
        t.on_data(host(2), Some(new.clone())),
        done(Some(new.clone()), vec![(host(1), new)], true)
    );
}

#[test]
fn a_replica_without_the_cell_is_repaired_with_the_winner() {
    let cell = live(5, "v");
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    t.on_data(host(1), None);
    assert_eq!(
        t.on_digest(host(2), digest(&cell)),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(
        t.on_data(host(2), Some(cell.clone())),
        done(Some(cell.clone()), vec![(host(1), cell)], true)
    );
}

#[test]
fn a_tombstone_wins_and_is_repaired_like_any_cell() {
    let (value, deletion) = (live(5, "v"), Cell::tombstone(Timestamp(7)));
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    t.on_data(host(1), Some(value));
    t.on_digest(host(2), digest(&deletion));
    let Some(ReadAction::Done(outcome)) = Some(t.on_data(host(2), Some(deletion.clone()))) else {
        panic!("expected done");
    };
    assert_eq!(outcome.winner, Some(deletion.clone()));
    assert_eq!(outcome.repairs, vec![(host(1), deletion)]);
    assert_eq!(outcome.visible_value(NOW), None);
}

#[test]
fn no_cell_anywhere_means_no_winner_and_no_repairs() {
    let mut t = tracker(One, &simple_replicas(&[]));
    assert_eq!(t.on_data(host(1), None), done(None, vec![], false));
}

#[test]
fn a_failed_digest_replica_is_replaced_by_a_spare() {
    let cell = live(5, "v");
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    assert_eq!(
        t.on_failure(host(2)),
        ReadAction::Contact(vec![(host(3), Request::Digest)])
    );
    assert_eq!(t.on_data(host(1), Some(cell.clone())), ReadAction::Wait);
    assert_eq!(
        t.on_digest(host(3), digest(&cell)),
        done(Some(cell), vec![], false)
    );
}

#[test]
fn a_failed_data_replica_is_replaced_by_a_data_request_to_a_spare() {
    let cell = live(5, "v");
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    assert_eq!(
        t.on_failure(host(1)),
        ReadAction::Contact(vec![(host(3), Request::Data)])
    );
    t.on_digest(host(2), digest(&cell));
    assert_eq!(
        t.on_data(host(3), Some(cell.clone())),
        done(Some(cell), vec![], false)
    );
}

#[test]
fn a_timeout_contacts_spares_in_place_of_slow_replicas_whose_late_answers_still_count() {
    let cell = live(5, "v");
    let mut t = tracker(One, &simple_replicas(&[]));
    assert_eq!(
        t.on_timeout(),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(
        t.on_data(host(1), Some(cell.clone())),
        done(Some(cell), vec![], false)
    );
}

#[test]
fn a_slow_data_replica_is_replaced_by_a_digest_replica_when_no_spares_remain() {
    let cell = live(5, "v");
    let mut t = tracker(Quorum, &simple_replicas(&[3]));
    assert_eq!(t.on_digest(host(2), digest(&cell)), ReadAction::Wait);
    assert_eq!(
        t.on_timeout(),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(t.on_data(host(2), Some(cell.clone())), ReadAction::Wait);
    assert_eq!(
        t.on_data(host(1), Some(cell.clone())),
        done(Some(cell), vec![], false)
    );
}

#[test]
fn a_timeout_with_nobody_new_to_ask_fails_the_read() {
    let mut t = tracker(All, &simple_replicas(&[]));
    t.on_data(host(1), Some(live(5, "v")));
    let failure = ReadFailure {
        level: All,
        required: 3,
        received: 1,
        timed_out: true,
        damaged: 0,
    };
    assert_eq!(t.on_timeout(), ReadAction::Failed(failure.clone()));
    assert_eq!(
        failure.to_string(),
        "read timed out at consistency level ALL: 1 of 3 required responses received"
    );
    assert_eq!(t.on_data(host(2), None), ReadAction::Wait);
    assert_eq!(t.on_timeout(), ReadAction::Wait);
}

#[test]
fn too_many_failures_fail_the_read_at_once() {
    let mut t = tracker(All, &simple_replicas(&[]));
    let failure = ReadFailure {
        level: All,
        required: 3,
        received: 0,
        timed_out: false,
        damaged: 0,
    };
    assert_eq!(t.on_failure(host(3)), ReadAction::Failed(failure.clone()));
    assert_eq!(
        failure.to_string(),
        "read failed at consistency level ALL: 0 of 3 required responses received"
    );
}

#[test]
fn replies_from_strangers_and_duplicates_are_ignored() {
    let cell = live(5, "v");
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    assert_eq!(t.on_data(host(3), Some(live(9, "spare"))), ReadAction::Wait);
    assert_eq!(t.on_data(host(99), None), ReadAction::Wait);
    assert_eq!(t.on_failure(host(99)), ReadAction::Wait);
    assert_eq!(t.on_data(host(1), Some(cell.clone())), ReadAction::Wait);
    assert_eq!(t.on_data(host(1), Some(live(9, "again"))), ReadAction::Wait);
    assert_eq!(t.on_failure(host(1)), ReadAction::Wait);
    assert_eq!(
        t.on_digest(host(2), digest(&cell)),
        done(Some(cell), vec![], false)
    );
}

#[test]
fn a_replica_whose_digest_differed_is_repaired_even_if_its_data_never_came() {
    let (new, old) = (live(6, "new"), live(5, "old"));
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    t.on_data(host(1), Some(new.clone()));
    t.on_digest(host(2), digest(&old));
    assert_eq!(
        t.on_failure(host(2)),
        ReadAction::Contact(vec![(host(3), Request::Data)])
    );
    assert_eq!(
        t.on_data(host(3), Some(new.clone())),
        done(Some(new.clone()), vec![(host(2), new)], true)
    );
}

#[test]
fn each_quorum_tops_up_only_in_the_dc_that_lost_a_replica() {
    let natural = nts_replicas(&[]);
    let plan = plan(EachQuorum, &nts_3_2(), &natural);
    let mut t = ReadTracker::new(&plan);
    assert_eq!(
        t.on_failure(host(2)),
        ReadAction::Contact(vec![(host(3), Request::Digest)])
    );
    let mut t = ReadTracker::new(&plan);
    let Some(ReadAction::Failed(failure)) = Some(t.on_failure(host(4))) else {
        panic!("dc2 has no spare");
    };
    assert_eq!(
        (failure.required, failure.received, failure.timed_out),
        (4, 0, false)
    );
}

#[test]
fn local_quorum_on_nts_tops_up_from_local_spares_only() {
    let natural = nts_replicas(&[]);
    let plan = plan(LocalQuorum, &nts_3_2(), &natural);
    let mut t = ReadTracker::new(&plan);
    assert_eq!(
        t.on_failure(host(2)),
        ReadAction::Contact(vec![(host(3), Request::Digest)])
    );
    assert!(matches!(t.on_failure(host(3)), ReadAction::Failed(_)));
}

// ---- speculative retry ----

fn speculating(level: ConsistencyLevel, natural: &[ReplicaCandidate]) -> (ReadTracker, Instant) {
    let at = Instant::now() + std::time::Duration::from_millis(10);
    (tracker(level, natural).with_speculative_retry(at), at)
}

#[test]
fn a_read_still_waiting_for_data_at_its_deadline_asks_a_spare_for_data() {
    let cell = live(5, "v");
    let (mut t, at) = speculating(Quorum, &simple_replicas(&[]));
    assert_eq!(t.next_deadline(), Some(at));
    assert_eq!(t.on_digest(host(2), digest(&cell)), ReadAction::Wait);
    let early = at - std::time::Duration::from_micros(1);
    assert_eq!(
        t.on_timer(early),
        ReadAction::Wait,
        "not before the deadline"
    );
    assert_eq!(t.next_deadline(), Some(at));
    assert_eq!(
        t.on_timer(at),
        ReadAction::Contact(vec![(host(3), Request::Data)])
    );
    // The spare's data and the digest meet QUORUM; host 1 is never waited for.
    assert_eq!(
        t.on_data(host(3), Some(cell.clone())),
        done(Some(cell), vec![], false)
    );
    assert_eq!(t.on_data(host(1), None), ReadAction::Wait, "too late");
}

#[test]
fn a_read_with_data_but_a_slow_digest_asks_a_spare_for_a_digest() {
    let cell = live(5, "v");
    let (mut t, at) = speculating(Quorum, &simple_replicas(&[]));
    assert_eq!(t.on_data(host(1), Some(cell.clone())), ReadAction::Wait);
    assert_eq!(
        t.on_timer(at),
        ReadAction::Contact(vec![(host(3), Request::Digest)])
    );
    assert_eq!(
        t.on_digest(host(3), digest(&cell)),
        done(Some(cell), vec![], false)
    );
}

#[test]
fn the_slow_replica_still_counts_if_it_answers_before_the_spare() {
    let cell = live(5, "v");
    let (mut t, at) = speculating(Quorum, &simple_replicas(&[]));
    assert_eq!(t.on_data(host(1), Some(cell.clone())), ReadAction::Wait);
    assert!(matches!(t.on_timer(at), ReadAction::Contact(_)));
    assert_eq!(
        t.on_digest(host(2), digest(&cell)),
        done(Some(cell), vec![], false)
    );
    assert_eq!(
        t.on_digest(host(3), digest(&live(1, "x"))),
        ReadAction::Wait
    );
}

#[test]
fn a_read_speculates_once_and_not_after_it_finished() {
    let cell = live(5, "v");
    let (mut t, at) = speculating(Quorum, &simple_replicas(&[]));
    assert!(matches!(t.on_timer(at), ReadAction::Contact(_)));
    assert_eq!(t.next_deadline(), None);
    let later = at + std::time::Duration::from_secs(1);
    assert_eq!(t.on_timer(later), ReadAction::Wait);

    let (mut finished, at) = speculating(Quorum, &simple_replicas(&[]));
    finished.on_digest(host(2), digest(&cell));
    assert!(matches!(
        finished.on_data(host(1), Some(cell)),
        ReadAction::Done(_)
    ));
    assert_eq!(finished.next_deadline(), None);
    assert_eq!(finished.on_timer(at), ReadAction::Wait);
}

#[test]
fn without_a_deadline_or_a_spare_a_read_does_not_speculate() {
    let mut plain = tracker(Quorum, &simple_replicas(&[]));
    assert_eq!(plain.next_deadline(), None);
    assert_eq!(plain.on_timer(Instant::now()), ReadAction::Wait);
    // ALL contacts every replica: there is no spare to ask.
    let (mut all, at) = speculating(All, &simple_replicas(&[]));
    assert_eq!(all.on_timer(at), ReadAction::Wait);
    // QUORUM with one replica down has no live spare either.
    let (mut down, at) = speculating(Quorum, &simple_replicas(&[3]));
    assert_eq!(down.on_timer(at), ReadAction::Wait);
    // The round timeout still fails them as before.
    assert!(matches!(down.on_timeout(), ReadAction::Failed(f) if f.timed_out));
}

#[test]
fn a_data_round_finishes_on_a_quorum_of_data_without_the_stalled_replica() {
    // Host 1 was asked for data and stalls; the speculation asks host 3 for
    // data; host 2's digest differs from it, so the data round asks host 2.
    let (new, old) = (live(6, "new"), live(5, "old"));
    let (mut t, at) = speculating(Quorum, &simple_replicas(&[]));
    assert_eq!(t.on_digest(host(2), digest(&new)), ReadAction::Wait);
    assert_eq!(
        t.on_timer(at),
        ReadAction::Contact(vec![(host(3), Request::Data)])
    );
    assert_eq!(
        t.on_data(host(3), Some(old)),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    // Hosts 2 and 3 hold data: QUORUM is met, host 1 is not waited for.
    assert_eq!(
        t.on_data(host(2), Some(new.clone())),
        done(Some(new.clone()), vec![(host(3), new)], true)
    );
    assert_eq!(t.on_data(host(1), None), ReadAction::Wait, "too late");
}

#[test]
fn a_speculation_after_a_digest_mismatch_is_dropped() {
    let (mut t, at) = speculating(Quorum, &simple_replicas(&[]));
    assert_eq!(
        t.on_digest(host(2), digest(&live(9, "new"))),
        ReadAction::Wait
    );
    assert_eq!(
        t.on_data(host(1), Some(live(1, "old"))),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(t.next_deadline(), None, "the data round does not speculate");
    assert_eq!(t.on_timer(at), ReadAction::Wait);
}

#[test]
fn local_quorum_speculates_only_to_a_local_spare() {
    let plan = plan(LocalQuorum, &nts_3_2(), &nts_replicas(&[]));
    let at = Instant::now();
    let mut t = ReadTracker::new(&plan).with_speculative_retry(at);
    let asked: BTreeSet<HostId> = plan.requests().iter().map(|&(h, _)| h).collect();
    match t.on_timer(at) {
        ReadAction::Contact(requests) => {
            assert_eq!(requests.len(), 1);
            let (spare, request) = requests[0];
            assert_eq!(request, Request::Data);
            assert!(!asked.contains(&spare));
            assert!([host(1), host(2), host(3)].contains(&spare), "{spare}");
        }
        other => panic!("{other:?}"),
    }
}

// ---- damaged replicas ----

#[test]
fn at_one_a_damaged_replica_is_read_around_and_repaired_with_the_winner() {
    let cell = live(5, "v");
    let mut t = tracker(One, &simple_replicas(&[]));
    assert_eq!(
        t.on_damaged(host(1)),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(
        t.on_data(host(2), Some(cell.clone())),
        done(Some(cell.clone()), vec![(host(1), cell.clone())], false)
    );
    let mut repair = t.read_repair().expect("the damaged replica is stale");
    assert_eq!(repair.targets(), vec![host(1)]);
    assert_eq!(repair.winner(), &cell);
    assert_eq!(repair.status(), RepairAction::Done, "one holder meets ONE");
}

#[test]
fn alone_a_damaged_replica_fails_the_read_at_once_and_never_answers_no_cell() {
    for level in [One, LocalOne] {
        let mut t = tracker(level, &simple_replicas(&[2, 3]));
        let failure = ReadFailure {
            level,
            required: 1,
            received: 0,
            timed_out: false,
            damaged: 1,
        };
        assert_eq!(t.on_damaged(host(1)), ReadAction::Failed(failure.clone()));
        assert_eq!(
            failure.to_string(),
            format!(
                "read failed at consistency level {level}: 0 of 1 required responses received; \
                 1 replica's copy does not read back"
            )
        );
        assert!(t.read_repair().is_none());
    }
}

#[test]
fn at_quorum_a_damaged_digest_replica_is_replaced_by_the_spare() {
    let cell = live(5, "v");
    let mut t = tracker(Quorum, &simple_replicas(&[]));
    assert_eq!(
        t.on_damaged(host(2)),
        ReadAction::Contact(vec![(host(3), Request::Digest)])
    );
    assert_eq!(t.on_data(host(1), Some(cell.clone())), ReadAction::Wait);
    assert_eq!(
        t.on_digest(host(3), digest(&cell)),
        done(Some(cell.clone()), vec![(host(2), cell)], false)
    );
    let mut repair = t.read_repair().unwrap();
    assert_eq!(repair.targets(), vec![host(2)]);
    assert_eq!(repair.status(), RepairAction::Done);
}

#[test]
fn at_quorum_with_the_spare_down_a_damaged_replica_fails_the_read() {
    // The down replica may hold the newest write: answering from the one
    // readable replica could go back in time.
    let mut t = tracker(Quorum, &simple_replicas(&[3]));
    t.on_data(host(1), Some(live(5, "v")));
    assert!(matches!(t.on_damaged(host(2)), ReadAction::Failed(_)));
}

#[test]
fn at_all_a_damaged_replica_counts_once_read_repair_has_given_it_the_winner() {
    let cell = live(5, "v");
    let mut t = tracker(All, &simple_replicas(&[]));
    assert_eq!(t.on_damaged(host(3)), ReadAction::Wait);
    assert_eq!(t.on_digest(host(2), digest(&cell)), ReadAction::Wait);
    assert_eq!(
        t.on_data(host(1), Some(cell.clone())),
        done(Some(cell.clone()), vec![(host(3), cell)], false)
    );
    let mut repair = t.read_repair().unwrap();
    assert_eq!(repair.targets(), vec![host(3)]);
    assert_eq!(repair.status(), RepairAction::Wait, "2 of 3 hold it");
    assert_eq!(repair.on_ack(host(3)), RepairAction::Done);
}

#[test]
fn at_all_a_damaged_data_replica_has_the_data_asked_of_a_digest_replica() {
    let cell = live(5, "v");
    let mut t = tracker(All, &simple_replicas(&[]));
    assert_eq!(t.on_digest(host(2), digest(&cell)), ReadAction::Wait);
    assert_eq!(
        t.on_damaged(host(1)),
        ReadAction::Contact(vec![(host(2), Request::Data)])
    );
    assert_eq!(t.on_digest(host(3), digest(&cell)), ReadAction::Wait);
    assert_eq!(
        t.on_data(host(2), Some(cell.clone())),
        done(Some(cell.clone()), vec![(host(1), cell)], false)
    );
}

#[test]
fn at_all_with_every_replica_damaged_the_read_fails_without_waiting() {
    let mut t = tracker(All, &simple_replicas(&[]));
    assert_eq!(t.on_damaged(host(1)), ReadAction::Wait);
    assert_eq!(t.on_damaged(host(2)), ReadAction::Wait);
    assert!(matches!(
        t.on_damaged(host(3)),
        ReadAction::Failed(ReadFailure {
            timed_out: false,
            damaged: 3,
            ..
        })
    ));
}

#[test]
fn with_no_cell_anywhere_a_damaged_replica_gets_no_repair() {
    let mut t = tracker(All, &simple_replicas(&[]));
    t.on_damaged(host(3));
    t.on_digest(host(2), Digest::of(None));
    assert_eq!(t.on_data(host(1), None), done(None, vec![], false));
    assert!(t.read_repair().is_none());
}

// ---- a simulated cluster ----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    Answers,
    /// Answers its first request and fails any later one (it crashed mid-read).
    AnswersOnce,
    Fails,
    Silent,
    /// Its copy of the cell does not read back.
    Damaged,
}

fn behaviours() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        5 => Just(Behaviour::Answers),
        1 => Just(Behaviour::AnswersOnce),
        1 => Just(Behaviour::Fails),
        1 => Just(Behaviour::Silent),
        1 => Just(Behaviour::Damaged),
    ]
}

/// Few distinct cells, so that replicas often agree, with tombstones and
/// cells expired at [`NOW`] among them.
fn cells() -> impl Strategy<Value = Option<Cell>> {
    proptest::option::weighted(
        0.8,
        (
            0i64..3,
            prop_oneof![Just(None), Just(Some(50)), Just(Some(500))],
            0u8..3,
        )
            .prop_map(|(ts, expires, value)| Cell {
                timestamp: Timestamp(ts),
                expires_at: expires.map(Timestamp),
                value: (value > 0).then(|| vec![value]),
            }),
    )
}

/// What one simulated read did.
struct Run {
    last: ReadAction,
    /// Data answers delivered, in delivery order.
    data: Vec<Option<Cell>>,
    /// Hosts that delivered any answer.
    answered: BTreeSet<HostId>,
    /// Hosts that answered that their copy does not read back.
    damaged: BTreeSet<HostId>,
}

/// Delivers the read's requests in the order `choices` picks, times out
/// when nothing is in flight, and at step `speculate_at` (if any) fires the
/// speculation timer.
fn simulate(
    plan: &ReadPlan,
    cells: &BTreeMap<HostId, Option<Cell>>,
    behaviour: &BTreeMap<HostId, Behaviour>,
    choices: &[usize],
    speculate_at: Option<usize>,
) -> Run {
    let deadline = Instant::now();
    let mut t = ReadTracker::new(plan);
    if speculate_at.is_some() {
        t = t.with_speculative_retry(deadline);
    }
    let mut in_flight = plan.requests();
    let mut choices = choices.iter().cycle();
    let mut asked_before = BTreeSet::new();
    let mut run = Run {
        last: ReadAction::Wait,
        data: Vec::new(),
        answered: BTreeSet::new(),
        damaged: BTreeSet::new(),
    };
    for step in 0..1000 {
        let action = if speculate_at == Some(step) {
            t.on_timer(deadline)
        } else if in_flight.is_empty() {
            t.on_timeout()
        } else {
            let index = choices.next().copied().unwrap_or(0) % in_flight.len();
            let (h, request) = in_flight.remove(index);
            let first_request = asked_before.insert(h);
            match behaviour[&h] {
                Behaviour::Silent => continue,
                Behaviour::Fails => t.on_failure(h),
                Behaviour::Damaged => {
                    run.damaged.insert(h);
                    t.on_damaged(h)
                }
                Behaviour::AnswersOnce if !first_request => t.on_failure(h),
                Behaviour::Answers | Behaviour::AnswersOnce => {
                    run.answered.insert(h);
                    let cell = cells[&h].clone();
                    match request {
                        Request::Data => {
                            run.data.push(cell.clone());
                            t.on_data(h, cell)
                        }
                        Request::Digest => t.on_digest(h, Digest::of(cell.as_ref())),
                    }
                }
            }
        };
        match action {
            ReadAction::Wait => {}
            ReadAction::Contact(requests) => in_flight.extend(requests),
            finished => {
                run.last = finished;
                return run;
            }
        }
    }
    panic!("the read did not finish");
}

/// A read to simulate: its level and keyspace, each replica's cell and
/// behaviour, the delivery choices, and the step the speculation timer fires
/// at (if it does).
type ReadScenario = (
    ConsistencyLevel,
    Scenario,
    Vec<Option<Cell>>,
    Vec<Behaviour>,
    Vec<usize>,
    Option<usize>,
);

fn read_scenarios() -> impl Strategy<Value = ReadScenario> {
    (
        proptest::sample::select(ConsistencyLevel::ALL_LEVELS[1..].to_vec()),
        scenarios(),
        proptest::collection::vec(cells(), 12),
        proptest::collection::vec(behaviours(), 12),
        proptest::collection::vec(0usize..64, 1..24),
        proptest::option::of(0usize..6),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn reads_finish_with_the_reconciled_winner_and_repair_exactly_the_replicas_that_differ(
        (level, s, cell_list, behaviour_list, choices, speculate_at) in read_scenarios()
    ) {
        let Ok(plan) = plan_read(level, &s.strategy, &s.local_dc, &s.natural) else {
            return Ok(());
        };
        let hosts: Vec<HostId> = s.natural.iter().map(|c| c.host).collect();
        let cells: BTreeMap<_, _> = hosts.iter().copied().zip(cell_list).collect();
        let behaviour: BTreeMap<_, _> = hosts.iter().copied().zip(behaviour_list).collect();
        let run = simulate(&plan, &cells, &behaviour, &choices, speculate_at);

        match run.last {
            ReadAction::Done(outcome) => {
                prop_assert!(!run.data.is_empty(), "done without a data answer");
                let fold = run.data.iter().flatten().cloned().reduce(Cell::reconcile);
                prop_assert_eq!(&outcome.winner, &fold);
                let expected: BTreeSet<HostId> = match &outcome.winner {
                    None => BTreeSet::new(),
                    Some(w) => run.answered.iter()
                        .filter(|h| cells[h].as_ref() != Some(w))
                        .chain(&run.damaged)
                        .copied()
                        .collect(),
                };
                // A damaged replica stands in for an answer only when the
                // level needs every replica.
                if !plan.needs_every_replica() {
                    let readable = run.answered.iter().map(|&h| plan.dc_of(h));
                    prop_assert!(plan.requirement().is_met_by(readable));
                }
                let repaired: BTreeSet<HostId> = outcome.repairs.iter().map(|(h, _)| *h).collect();
                prop_assert_eq!(repaired.len(), outcome.repairs.len(), "one repair per replica");
                prop_assert_eq!(repaired, expected);
                for (_, cell) in &outcome.repairs {
                    prop_assert_eq!(Some(cell), outcome.winner.as_ref());
                }
            }
            ReadAction::Failed(failure) => {
                prop_assert!(failure.received < failure.required);
                // It only fails when the replicas that always answer cannot meet the level.
                let answering = plan.contacted().iter().chain(plan.spares())
                    .filter(|&h| behaviour[h] == Behaviour::Answers)
                    .map(|&h| plan.dc_of(h));
                prop_assert!(!plan.requirement().is_met_by(answering));
            }
            other => prop_assert!(false, "unfinished: {other:?}"),
        }
    }

    #[test]
    fn reads_where_enough_replicas_answer_always_succeed(
        (level, s, cell_list, _behaviours, choices, speculate_at) in read_scenarios()
    ) {
        let Ok(plan) = plan_read(level, &s.strategy, &s.local_dc, &s.natural) else {
            return Ok(());
        };
        let hosts: Vec<HostId> = s.natural.iter().map(|c| c.host).collect();
        let cells: BTreeMap<_, _> = hosts.iter().copied().zip(cell_list).collect();
        let behaviour = hosts.iter().map(|&h| (h, Behaviour::Answers)).collect();
        let run = simulate(&plan, &cells, &behaviour, &choices, speculate_at);
        prop_assert!(matches!(run.last, ReadAction::Done(_)), "{:?}", run.last);
    }
}
