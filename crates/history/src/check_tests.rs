//! The checker on hand-made histories: ones that must pass, and one that
//! must fail for each promise.

use std::time::Duration;

use crate::history::*;
use crate::{CheckReport, Checks, ClockBound, ViolationKind, check};

mod batches;
mod deletes;
mod indeterminate;
mod lww;
mod ttl;

/// RF 3, every check but write order, clocks in step (bound zero), no
/// stamp deadline.
const RF3: Checks = Checks {
    replication_factor: 3,
    monotonic_reads: true,
    range_movements: Vec::new(),
    clocks: ClockBound {
        bound: Duration::ZERO,
        exempt: Vec::new(),
    },
    stamp_deadline: None,
    write_order: false,
};

/// When the final reads happen in these tests: after every operation.
const FINAL_READ_MS: u64 = 100_000;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn version(value: &str, ts: i64) -> Version {
    Version {
        timestamp: Timestamp(ts),
        value: value.as_bytes().to_vec(),
    }
}

fn timeout() -> Failure {
    Failure {
        kind: FailureKind::Timeout,
        message: "write timed out".into(),
    }
}

/// The client gave up: its coordinator never answered.
fn gave_up() -> Failure {
    Failure {
        kind: FailureKind::ClientTimeout,
        message: "no answer within the client's timeout".into(),
    }
}

fn outcome(ts: Option<i64>) -> WriteOutcome {
    match ts {
        Some(ts) => WriteOutcome::Acked(Timestamp(ts)),
        None => WriteOutcome::Failed(timeout()),
    }
}

/// A QUORUM write op of `write` over `[from, to]` ms by client 0 via node 0.
fn write_op(write: Write, from: u64, to: u64) -> Op {
    Op {
        client: ClientId(0),
        coordinator: NodeId(0),
        level: Level::Quorum,
        invoked: ms(from),
        completed: ms(to),
        kind: OpKind::Write(write),
    }
}

/// A QUORUM write of `value` to `key` over `[from, to]` ms by client 0 via
/// node 0: acknowledged at `ts`, or failed (`None`).
fn write(key: &str, value: &str, from: u64, to: u64, ts: Option<i64>) -> Op {
    write_op(put_part(key, value, None, ts), from, to)
}

/// `key`'s put of `value` (with `ttl`), acknowledged at `ts` or failed.
fn put_part(key: &str, value: &str, ttl: Option<Duration>, ts: Option<i64>) -> Write {
    Write {
        key: key.into(),
        mutation: Mutation::Put {
            value: value.as_bytes().to_vec(),
            ttl,
        },
        outcome: outcome(ts),
    }
}

/// A QUORUM read of `key` over `[from, to]` ms by client 1 via node 1 that
/// returned `found` (`None`: not found).
fn read(key: &str, from: u64, to: u64, found: Option<(&str, i64)>) -> Op {
    Op {
        client: ClientId(1),
        coordinator: NodeId(1),
        level: Level::Quorum,
        invoked: ms(from),
        completed: ms(to),
        kind: OpKind::Read {
            key: key.into(),
            outcome: match found {
                Some((value, ts)) => ReadOutcome::Found(version(value, ts)),
                None => ReadOutcome::NotFound,
            },
        },
    }
}

fn at(level: Level, mut op: Op) -> Op {
    op.level = level;
    op
}

/// A live cell of `value` at `ts`, as a replica holds it.
fn live(value: &str, ts: i64) -> HeldCell {
    HeldCell {
        timestamp: Timestamp(ts),
        value: Some(value.as_bytes().to_vec()),
        expires_at: None,
    }
}

/// `key` after healing: every one of three replicas holds `cell`, and the
/// ALL read answers what it shows.
fn settled(key: &str, cell: Option<HeldCell>) -> FinalKey {
    let read_all = match &cell {
        Some(HeldCell {
            timestamp,
            value: Some(value),
            ..
        }) => ReadOutcome::Found(Version {
            timestamp: *timestamp,
            value: value.clone(),
        }),
        _ => ReadOutcome::NotFound,
    };
    FinalKey {
        key: key.into(),
        read_at: ms(FINAL_READ_MS),
        read_all,
        replicas: (0..3).map(|n| (NodeId(n), cell.clone())).collect(),
    }
}

/// `key` after healing: every one of three replicas and the ALL read hold
/// `cell`, a value that never expires.
fn converged(key: &str, cell: Option<(&str, i64)>) -> FinalKey {
    settled(key, cell.map(|(v, ts)| live(v, ts)))
}

fn kinds(report: &CheckReport) -> Vec<ViolationKind> {
    report.violations.iter().map(|v| v.kind).collect()
}

#[test]
fn a_clean_history_passes() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        read("k", 20, 30, Some(("a", 100))),
        write("k", "b", 40, 50, Some(200)),
        read("k", 60, 70, Some(("b", 200))),
    ];
    let report = check(&history, &[converged("k", Some(("b", 200)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
    assert_eq!(
        (report.keys, report.writes_acked, report.reads_ok),
        (1, 2, 2)
    );
}

#[test]
fn an_acknowledged_write_missing_from_the_final_state_is_lost() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write("k", "b", 40, 50, Some(200)),
    ];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Lost], "{report}");
    let text = report.violations[0].to_string();
    assert!(
        text.contains("\"b\"@200") && text.contains("op #1"),
        "{text}"
    );
    assert!(text.contains("[0.040s–0.050s] client0 via node0"), "{text}");
    // A key read back as nothing lost its write too.
    let report = check(&history, &[converged("k", None)], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Lost, ViolationKind::Lost]);
}

#[test]
fn writes_acknowledged_below_quorum_are_not_promised_to_survive() {
    let history = vec![at(Level::One, write("k", "a", 0, 10, Some(100)))];
    let report = check(&history, &[converged("k", None)], &[], &RF3);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn a_failed_write_may_be_missing_from_the_end_and_may_be_read() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write("k", "b", 20, 2020, None),
        read("k", 30, 40, Some(("b", 150))),
        write("k", "c", 3000, 3010, None),
    ];
    // "b" landed (a read saw it); "c" did not.
    let report = check(&history, &[converged("k", Some(("b", 150)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
    assert_eq!(
        (report.writes_failed, report.reads_of_failed_writes),
        (2, 1)
    );
}

#[test]
fn a_read_older_than_a_write_acknowledged_before_it_began_is_stale() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write("k", "b", 40, 50, Some(200)),
        read("k", 60, 70, Some(("a", 100))),
    ];
    let report = check(&history, &[converged("k", Some(("b", 200)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Stale], "{report}");
    let text = report.violations[0].to_string();
    assert!(
        text.contains("a read returned \"a\"@100 after \"b\"@200 was acknowledged"),
        "{text}"
    );
    assert!(
        text.contains("op #2 [0.060s–0.070s] client1 via node1"),
        "{text}"
    );
    // Not found is older than anything.
    let history = vec![write("k", "a", 0, 10, Some(100)), read("k", 60, 70, None)];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Stale], "{report}");
}

#[test]
fn a_read_concurrent_with_a_write_may_return_either_version() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write("k", "b", 40, 50, Some(200)),
        read("k", 45, 70, Some(("a", 100))),
        read("k", 20, 45, Some(("b", 200))),
    ];
    let report = check(&history, &[converged("k", Some(("b", 200)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
}

#[test]
fn levels_that_do_not_overlap_promise_no_fresh_reads() {
    let history = vec![
        at(Level::One, write("k", "a", 0, 10, Some(100))),
        at(Level::Two, read("k", 20, 30, None)),
        at(Level::One, read("k", 40, 50, Some(("a", 100)))),
        at(Level::One, read("k", 60, 70, None)),
    ];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
    // ONE + ALL overlap at RF 3.
    let history = vec![
        at(Level::One, write("k", "a", 0, 10, Some(100))),
        at(Level::All, read("k", 20, 30, None)),
    ];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Stale], "{report}");
}

#[test]
fn versions_are_ordered_by_timestamp_not_by_when_writes_completed() {
    // Two concurrent writes: "b" completes last but was stamped first.
    let history = vec![
        write("k", "b", 0, 50, Some(100)),
        write("k", "a", 10, 20, Some(150)),
        read("k", 60, 70, Some(("a", 150))),
    ];
    let report = check(&history, &[converged("k", Some(("a", 150)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
    // At one timestamp, the greater value wins.
    let history = vec![
        write("k", "x", 0, 10, Some(100)),
        write("k", "y", 0, 10, Some(100)),
    ];
    let report = check(&history, &[converged("k", Some(("y", 100)))], &[], &RF3);
    assert!(report.is_ok(), "{report}");
    let report = check(&history, &[converged("k", Some(("x", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Lost], "{report}");
}

#[test]
fn a_value_nobody_wrote_is_a_phantom() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        read("k", 20, 30, Some(("zz", 300))),
        // "a" was written to k, not to j.
        read("j", 20, 30, Some(("a", 100))),
    ];
    let finals = [
        converged("k", Some(("a", 100))),
        converged("j", Some(("a", 100))),
    ];
    let report = check(&history, &finals, &[], &RF3);
    assert_eq!(
        kinds(&report),
        [ViolationKind::Phantom; 6],
        "the read of k; of j the read, the ALL read and three replicas: {report}"
    );
    assert!(
        report.violations[0]
            .to_string()
            .contains("which no client wrote to this key"),
        "{report}"
    );
}

#[test]
fn a_value_read_before_its_write_was_sent_is_a_phantom() {
    let history = vec![
        read("k", 0, 10, Some(("a", 100))),
        write("k", "a", 20, 30, None),
    ];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Phantom], "{report}");
    assert!(report.to_string().contains("before its write was sent"));
}

#[test]
fn an_acknowledged_value_under_another_timestamp_is_a_phantom() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        read("k", 20, 30, Some(("a", 999))),
    ];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Phantom], "{report}");
    assert!(report.to_string().contains("acknowledged at timestamp 100"));
}

#[test]
fn replicas_that_differ_after_repair_are_divergent_and_named() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write("k", "b", 20, 30, Some(200)),
    ];
    let mut last = converged("k", Some(("b", 200)));
    last.replicas[2].1 = Some(live("a", 100));
    let report = check(&history, &[last], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Divergent], "{report}");
    let violation = &report.violations[0];
    assert_eq!(violation.node, Some(NodeId(2)));
    assert!(
        violation
            .to_string()
            .contains("node0: \"b\"@200, node1: \"b\"@200, node2: \"a\"@100"),
        "{violation}"
    );
    // A replica with nothing differs too.
    let mut last = converged("k", Some(("b", 200)));
    last.replicas[0].1 = None;
    let report = check(&history, &[last], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Divergent], "{report}");
}

#[test]
fn a_read_older_than_an_earlier_read_is_non_monotonic_when_checked() {
    let history = vec![
        write("k", "a", 0, 10, Some(100)),
        write("k", "b", 20, 2020, None),
        read("k", 30, 40, Some(("b", 150))),
        read("k", 50, 60, Some(("a", 100))),
    ];
    let finals = [converged("k", Some(("b", 150)))];
    let report = check(&history, &finals, &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::NonMonotonic], "{report}");
    let unchecked = Checks {
        monotonic_reads: false,
        ..RF3
    };
    assert!(check(&history, &finals, &[], &unchecked).is_ok());
}

#[test]
fn a_key_whose_final_read_failed_or_was_not_recorded_is_unreadable() {
    let history = vec![write("k", "a", 0, 10, Some(100))];
    let mut last = converged("k", Some(("a", 100)));
    last.read_all = ReadOutcome::Failed(timeout());
    let report = check(&history, &[last], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Unreadable], "{report}");
    let report = check(&history, &[], &[], &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Unreadable], "{report}");
}

#[test]
fn a_violation_names_the_faults_active_during_its_operations() {
    let history = vec![
        write("k", "a", 1000, 1010, Some(100)),
        read("k", 1020, 1030, None),
    ];
    let faults = [
        FaultWindow {
            label: "SIGSTOP".into(),
            node: NodeId(2),
            from: ms(900),
            until: Some(ms(1015)),
        },
        FaultWindow {
            label: "SIGKILL".into(),
            node: NodeId(1),
            from: ms(0),
            until: Some(ms(500)),
        },
        FaultWindow {
            label: "partition".into(),
            node: NodeId(0),
            from: ms(1025),
            until: None,
        },
    ];
    let report = check(&history, &[converged("k", Some(("a", 100)))], &faults, &RF3);
    assert_eq!(kinds(&report), [ViolationKind::Stale], "{report}");
    assert_eq!(
        report.violations[0].faults,
        [
            "SIGSTOP node2 [0.900s–1.015s]",
            "partition node0 [1.025s–end]"
        ]
    );
}

#[test]
fn writes_further_apart_than_the_clock_bound_must_keep_their_order() {
    let bound = Checks {
        clocks: ClockBound {
            bound: ms(500),
            exempt: Vec::new(),
        },
        write_order: true,
        ..RF3
    };
    // "b" was sent 600 ms after "a" was acknowledged, yet stamped lower: a
    // fast clock stamped "a".
    let reordered = vec![
        write("k", "a", 0, 10, Some(5_000_000)),
        write("k", "b", 610, 620, Some(4_000_000)),
    ];
    let finals = [converged("k", Some(("a", 5_000_000)))];
    assert!(check(&reordered, &finals, &[], &RF3).is_ok(), "not checked");
    let report = check(&reordered, &finals, &[], &bound);
    assert_eq!(kinds(&report), [ViolationKind::Reordered], "{report}");

    // Closer than the bound, either order is allowed.
    let close = vec![
        write("k", "a", 0, 10, Some(5_000_000)),
        write("k", "b", 400, 420, Some(4_000_000)),
    ];
    assert!(check(&close, &finals, &[], &bound).is_ok());

    // A write its coordinator stamped while its clock was pushed past the
    // bound is not judged.
    let exempt = Checks {
        clocks: ClockBound {
            bound: ms(500),
            exempt: vec![FaultWindow {
                label: "clock jump".into(),
                node: NodeId(0),
                from: ms(0),
                until: Some(ms(100)),
            }],
        },
        write_order: true,
        ..RF3
    };
    assert!(check(&reordered, &finals, &[], &exempt).is_ok());
}

#[test]
fn a_write_told_failed_must_not_overwrite_a_later_acknowledged_write_of_its_client() {
    let bound = Checks {
        clocks: ClockBound {
            bound: ms(500),
            exempt: Vec::new(),
        },
        write_order: true,
        ..RF3
    };
    // Client 0's write of "old" timed out at 1,000 ms; at 2,000 ms it wrote
    // "new", acknowledged at 2,000,000 µs. A paused coordinator then
    // stamped "old" with its clock at 3,000 ms: it wins.
    let late = vec![
        write("k", "old", 0, 1_000, None),
        write("k", "new", 2_000, 2_010, Some(2_000_000)),
        read("k", 4_000, 4_010, Some(("old", 3_000_000))),
    ];
    let finals = [converged("k", Some(("old", 3_000_000)))];
    assert!(check(&late, &finals, &[], &RF3).is_ok(), "not checked");
    let report = check(&late, &finals, &[], &bound);
    assert_eq!(kinds(&report), [ViolationKind::LateWrite], "{report}");
    assert!(
        report.violations[0].what.contains("told failed"),
        "{report}"
    );

    // Seen only in the final state, it is found all the same.
    let unread = &late[..2];
    let report = check(unread, &finals, &[], &bound);
    assert_eq!(kinds(&report), [ViolationKind::LateWrite], "{report}");

    // The failed write applied with its early timestamp is fine: it lost.
    let early = vec![
        write("k", "old", 0, 1_000, None),
        write("k", "new", 2_000, 2_010, Some(2_000_000)),
        read("k", 4_000, 4_010, Some(("new", 2_000_000))),
    ];
    let finals = [converged("k", Some(("new", 2_000_000)))];
    assert!(check(&early, &finals, &[], &bound).is_ok());

    // Another client's later write is no promise of this one's; nor is a
    // write sent within the bound of the failure.
    let mut other_client = late.clone();
    if let Some(op) = other_client.get_mut(1) {
        op.client = ClientId(5);
    }
    let finals = [converged("k", Some(("old", 3_000_000)))];
    assert!(check(&other_client, &finals, &[], &bound).is_ok());
    let close = vec![
        write("k", "old", 0, 1_000, None),
        write("k", "new", 1_400, 1_410, Some(1_400_000)),
    ];
    assert!(check(&close, &finals, &[], &bound).is_ok());
}
