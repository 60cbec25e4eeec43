//! Tests of [`ReadRepair`]: built from finished reads, then fed acks,
//! failures and timeouts.

use ringstore_cell::Timestamp;

use super::*;
use crate::digest::Digest;
use crate::plan::plan_read;
use crate::read_tracker::{ReadAction, ReadTracker};
use crate::testkit::{dc, host, nts_3_2, nts_replicas, simple_3, simple_replicas};
use ConsistencyLevel::*;

fn live(ts: i64, value: &str) -> Cell {
    Cell::live(Timestamp(ts), value.as_bytes().to_vec())
}

/// A `QUORUM` read on SimpleStrategy rf 3 where host 1 had the new value and
/// host 2 an old one; hosts in `dead` were down.
fn quorum_read_with_a_stale_replica(dead: &[u128]) -> ReadTracker {
    let plan = plan_read(Quorum, &simple_3(), &dc("dc1"), &simple_replicas(dead)).unwrap();
    assert_eq!(plan.data_from(), host(1));
    assert_eq!(plan.digests_from(), &[host(2)]);
    let mut tracker = ReadTracker::new(&plan);
    let (new, old) = (live(9, "new"), live(1, "old"));
    assert_eq!(tracker.on_data(host(1), Some(new)), ReadAction::Wait);
    let round = tracker.on_digest(host(2), Digest::of(Some(&old)));
    assert!(matches!(round, ReadAction::Contact(_)), "{round:?}");
    let done = tracker.on_data(host(2), Some(old));
    assert!(matches!(done, ReadAction::Done(_)), "{done:?}");
    tracker
}

#[test]
fn a_read_that_needs_no_repair_has_none() {
    let plan = plan_read(Quorum, &simple_3(), &dc("dc1"), &simple_replicas(&[])).unwrap();
    let mut tracker = ReadTracker::new(&plan);
    assert!(tracker.read_repair().is_none(), "not finished yet");
    let cell = live(5, "v");
    tracker.on_digest(host(2), Digest::of(Some(&cell)));
    tracker.on_data(host(1), Some(cell));
    assert!(tracker.read_repair().is_none());
}

#[test]
fn the_read_is_answered_once_the_stale_replica_acks() {
    let mut repair = quorum_read_with_a_stale_replica(&[]).read_repair().unwrap();
    assert_eq!(repair.winner(), &live(9, "new"));
    assert_eq!(repair.targets(), vec![host(2)]);
    assert_eq!(repair.status(), RepairAction::Wait);
    assert_eq!(repair.on_ack(host(2)), RepairAction::Done);
    assert_eq!(
        repair.on_ack(host(2)),
        RepairAction::Wait,
        "done stays done"
    );
}

#[test]
fn a_stale_replica_that_cannot_take_the_write_is_replaced_by_a_spare() {
    let mut repair = quorum_read_with_a_stale_replica(&[]).read_repair().unwrap();
    assert_eq!(repair.status(), RepairAction::Wait);
    assert_eq!(
        repair.on_failure(host(2)),
        RepairAction::Send(vec![host(3)])
    );
    assert_eq!(
        repair.on_failure(host(2)),
        RepairAction::Wait,
        "counted once"
    );
    assert_eq!(repair.on_ack(host(3)), RepairAction::Done);
}

#[test]
fn with_nobody_left_to_write_to_the_repair_fails_naming_what_holds_the_value() {
    let mut repair = quorum_read_with_a_stale_replica(&[3])
        .read_repair()
        .unwrap();
    assert_eq!(repair.status(), RepairAction::Wait);
    let failed = repair.on_failure(host(2));
    let RepairAction::Failed(failure) = failed else {
        panic!("{failed:?}");
    };
    assert_eq!((failure.holding, failure.required), (1, 2));
    assert_eq!(
        failure.to_string(),
        "read repair at consistency level QUORUM: only 1 of 2 required replicas hold the \
         newest value"
    );
    assert_eq!(
        repair.on_ack(host(3)),
        RepairAction::Wait,
        "failed stays failed"
    );
}

#[test]
fn a_timeout_writes_to_a_spare_and_a_late_ack_still_counts() {
    let mut repair = quorum_read_with_a_stale_replica(&[]).read_repair().unwrap();
    assert_eq!(repair.status(), RepairAction::Wait);
    assert_eq!(repair.on_timeout(), RepairAction::Send(vec![host(3)]));
    assert_eq!(
        repair.on_ack(host(2)),
        RepairAction::Done,
        "the slow write acked"
    );
}

#[test]
fn a_second_timeout_with_no_spare_left_fails() {
    let mut repair = quorum_read_with_a_stale_replica(&[]).read_repair().unwrap();
    assert_eq!(repair.on_timeout(), RepairAction::Send(vec![host(3)]));
    assert!(matches!(repair.on_timeout(), RepairAction::Failed(_)));
}

#[test]
fn a_failure_after_a_timeout_waits_while_a_slow_write_may_still_ack() {
    let mut repair = quorum_read_with_a_stale_replica(&[]).read_repair().unwrap();
    assert_eq!(repair.on_timeout(), RepairAction::Send(vec![host(3)]));
    assert_eq!(repair.on_failure(host(3)), RepairAction::Wait);
    assert_eq!(repair.on_ack(host(2)), RepairAction::Done);
}

#[test]
fn holders_that_already_meet_the_level_answer_at_once() {
    let requirement = Requirement::Anywhere { count: 2 };
    let holders = vec![(host(1), dc("dc1")), (host(3), dc("dc1"))];
    let stale = vec![(host(2), dc("dc1"))];
    let mut repair = ReadRepair::new(
        Quorum,
        requirement,
        live(9, "new"),
        holders,
        stale,
        VecDeque::new(),
    );
    assert_eq!(repair.targets(), vec![host(2)], "the write still goes out");
    assert_eq!(repair.status(), RepairAction::Done);
}

#[test]
fn each_quorum_takes_a_spare_only_from_the_data_center_left_short() {
    // EACH_QUORUM on {dc1: 3, dc2: 2}: 2 in dc1 and 2 in dc2.
    let requirement = Requirement::for_level(EachQuorum, &nts_3_2(), &dc("dc1"));
    let located = |n: u128| {
        let dc_name = nts_replicas(&[])
            .into_iter()
            .find(|r| r.host == host(n))
            .map(|r| r.dc)
            .unwrap();
        (host(n), dc_name)
    };
    let holders = vec![located(1), located(2), located(4)];
    let stale = vec![located(5)];
    let spares = VecDeque::from([located(3)]);
    let mut repair = ReadRepair::new(
        EachQuorum,
        requirement,
        live(9, "new"),
        holders,
        stale,
        spares,
    );
    assert_eq!(repair.status(), RepairAction::Wait);
    let failed = repair.on_failure(host(5));
    assert!(
        matches!(failed, RepairAction::Failed(_)),
        "host 3 is in dc1, which is not short: {failed:?}"
    );
}
