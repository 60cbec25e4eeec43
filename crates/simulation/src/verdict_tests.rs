//! The verdict's rules on hand-made operations: which failures a fault
//! excuses and for how long, how the load within a fault is counted, and
//! what a node whose clock jumped must do.

use std::time::Duration;

use ringstore_history::{
    ClientId, Failure, FailureKind, FaultWindow, Level, Mutation, NodeId, Op, OpKind, ReadOutcome,
    Timestamp, Version, Write, WriteOutcome,
};

use super::*;
use crate::faults::{Fault, FaultKind, window};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A `kind` fault on `node` from `at` for `length` seconds of the load,
/// which started at 0.
fn fault(kind: FaultKind, node: usize, at: f64, length: f64) -> (Fault, FaultWindow) {
    let fault = Fault {
        kind,
        node,
        at: secs(at),
        length: secs(length),
        amount: Duration::from_secs(3),
        ahead: true,
        seed: 0,
    };
    let window = window(&fault, Duration::ZERO);
    (fault, window)
}

fn failure(kind: FailureKind, message: &str) -> Failure {
    Failure {
        kind,
        message: message.into(),
    }
}

/// A put through `node` over `[from, to]` seconds: acknowledged, or failed
/// with `failed`.
fn put(node: usize, from: f64, to: f64, failed: Option<Failure>) -> Op {
    let outcome = match failed {
        Some(failure) => WriteOutcome::Failed(failure),
        None => WriteOutcome::Acked(Timestamp(1)),
    };
    Op {
        client: ClientId(0),
        coordinator: NodeId(node),
        level: Level::Quorum,
        invoked: secs(from),
        completed: secs(to),
        kind: OpKind::Write(Write {
            key: "k000".into(),
            mutation: Mutation::Put {
                value: b"v".to_vec(),
                ttl: None,
            },
            outcome,
        }),
    }
}

/// A get through `node` over `[from, to]` seconds that answered
/// `outcome`.
fn get(node: usize, from: f64, to: f64, outcome: ReadOutcome) -> Op {
    Op {
        kind: OpKind::Read {
            key: "k000".into(),
            outcome,
        },
        ..put(node, from, to, None)
    }
}

/// Why the faults or the changes of topology excuse the failed `op`, if
/// they do.
fn excuse(
    op: &Op,
    faults: &[Fault],
    windows: &[FaultWindow],
    topology: &[FaultWindow],
) -> Option<&'static str> {
    let failed = Failed::of(op, op.failure()?);
    excuse_failure(&failed, faults, windows, topology)
}

/// Why `op` is excused by the one fault `(fault, window)`.
fn excused(op: &Op, (fault, window): &(Fault, FaultWindow)) -> Option<&'static str> {
    excuse(
        op,
        std::slice::from_ref(fault),
        std::slice::from_ref(window),
        &[],
    )
}

#[test]
fn a_failure_through_the_faulty_node_is_excused_only_while_it_is_faulty_and_recovering() {
    let crash = fault(FaultKind::Crash, 2, 10.0, 4.0);
    let unreachable = || Some(failure(FailureKind::Unreachable, "connection refused"));
    let through = |node, from| put(node, from, from + 0.5, unreachable());
    assert_eq!(excused(&through(2, 9.0), &crash), None, "before it");
    assert_eq!(
        excused(&through(2, 11.0), &crash),
        Some("through the faulty node")
    );
    let recovering = 14.0 + HEAL_GRACE.as_secs_f64() - 0.6;
    assert_eq!(
        excused(&through(2, recovering), &crash),
        Some("through the faulty node")
    );
    let recovered = 14.0 + HEAL_GRACE.as_secs_f64() + 0.1;
    assert_eq!(excused(&through(2, recovered), &crash), None, "after it");
    // Another coordinator's failure, not a slow one, is not excused.
    assert_eq!(excused(&through(1, 11.0), &crash), None);
    // An operation that succeeded needs no excuse.
    assert_eq!(excused(&put(2, 11.0, 11.5, None), &crash), None);
}

#[test]
fn a_timeout_through_a_healthy_node_is_excused_only_until_the_silent_node_is_marked_down() {
    let partition = fault(FaultKind::Partition, 2, 10.0, 10.0);
    let timeout = |from: f64, to: f64| {
        put(
            0,
            from,
            to,
            Some(failure(FailureKind::ClientTimeout, "no answer")),
        )
    };
    assert_eq!(
        excused(&timeout(11.0, 15.0), &partition),
        Some("a timeout before the unresponsive node was marked down")
    );
    let detected = 10.0 + DETECTION.as_secs_f64();
    assert_eq!(
        excused(&timeout(detected + 0.5, detected + 1.5), &partition),
        None,
        "after the others marked it down"
    );
    assert_eq!(
        excused(&timeout(20.5, 21.0), &partition),
        Some("a timeout while the healed node recovered")
    );
    // A clock that drifts leaves the node answering: no timeout excused.
    let drift = fault(FaultKind::ClockDrift, 2, 10.0, 10.0);
    assert_eq!(excused(&timeout(11.0, 15.0), &drift), None);
}

#[test]
fn unavailable_after_an_isolating_fault_is_excused_until_its_subjects_rejoined() {
    let unavailable = |from: f64| {
        put(
            0,
            from,
            from + 0.1,
            Some(failure(FailureKind::Unavailable, "too few replicas")),
        )
    };
    let partition = fault(FaultKind::Partition, 2, 10.0, 4.0);
    assert_eq!(
        excused(&unavailable(15.0), &partition),
        Some("the isolated node's stale down verdicts, until their subjects rejoined")
    );
    let rejoined = 14.0 + REJOIN.as_secs_f64() + 0.5;
    assert_eq!(excused(&unavailable(rejoined), &partition), None);
    // A crash cuts nobody off: the others never saw themselves declared down.
    let crash = fault(FaultKind::Crash, 2, 10.0, 4.0);
    assert_eq!(excused(&unavailable(15.0), &crash), None);
}

#[test]
fn a_one_way_drop_excuses_failures_until_its_stalled_connections_are_made_again() {
    let drop = fault(FaultKind::DropOutgoing, 2, 10.0, 4.0);
    let stalled = |from: f64, kind| put(0, from, from + 0.1, Some(failure(kind, "reset")));
    let reason = "a connection the one-way drop stalled, until its keep-alive gave up";
    let remade = 14.0 + recovery(&drop.0).as_secs_f64();
    assert_eq!(
        excused(&stalled(remade - 0.5, FailureKind::Unreachable), &drop),
        Some(reason)
    );
    assert_eq!(
        excused(&stalled(remade + 0.5, FailureKind::Unreachable), &drop),
        None
    );
    // An error nobody expects is never excused.
    assert_eq!(excused(&stalled(11.0, FailureKind::Other), &drop), None);
}

#[test]
fn a_failure_through_the_node_being_decommissioned_is_excused_while_it_leaves() {
    let leaving = FaultWindow {
        label: "node1 decommissioned".into(),
        node: NodeId(1),
        from: secs(20.0),
        until: Some(secs(25.0)),
    };
    let failed = |node, from: f64| {
        put(
            node,
            from,
            from + 0.1,
            Some(failure(FailureKind::Unavailable, "leaving")),
        )
    };
    let topology = std::slice::from_ref(&leaving);
    assert_eq!(
        excuse(&failed(1, 24.0), &[], &[], topology),
        Some("through the node being decommissioned")
    );
    assert_eq!(excuse(&failed(1, 30.0), &[], &[], topology), None);
    assert_eq!(excuse(&failed(0, 24.0), &[], &[], topology), None);
}

#[test]
fn the_load_within_a_fault_counts_each_kind_of_success_that_overlaps_it() {
    let (slow, window) = fault(FaultKind::SlowLinks, 2, 10.0, 4.0);
    let timeout = || Some(failure(FailureKind::Timeout, "timed out"));
    let found = ReadOutcome::Found(Version {
        timestamp: Timestamp(1),
        value: b"v".to_vec(),
    });
    let mut history = vec![
        put(0, 11.0, 11.1, None),
        // Overlapping its start counts.
        put(1, 9.9, 10.1, None),
        put(1, 12.0, 12.1, timeout()),
        get(0, 12.0, 12.1, found),
        get(0, 13.0, 13.1, ReadOutcome::NotFound),
        get(
            0,
            13.0,
            13.1,
            ReadOutcome::Failed(failure(FailureKind::Timeout, "x")),
        ),
        // Before and after it: not counted.
        put(0, 8.0, 9.0, None),
        get(0, 15.0, 15.1, ReadOutcome::NotFound),
    ];
    // A batch with one failed part did not succeed.
    let mut batch = put(0, 11.0, 11.2, None);
    let part = |outcome| Write {
        key: "k001".into(),
        mutation: Mutation::Delete,
        outcome,
    };
    batch.kind = OpKind::Batch(vec![
        part(WriteOutcome::Acked(Timestamp(2))),
        part(WriteOutcome::Failed(failure(FailureKind::Unavailable, "x"))),
    ]);
    history.push(batch);
    assert_eq!(load_within(&history, &window), (2, 2));
    let problem = too_little_load(&history, &slow, &window);
    assert!(
        problem.as_deref().is_some_and(
            |p| p.contains("2 writes acknowledged, 2 reads answered (at least 3 of each)")
        ),
        "{problem:?}"
    );
    history.push(put(0, 12.0, 12.1, None));
    history.push(get(0, 12.0, 12.1, ReadOutcome::NotFound));
    assert_eq!(load_within(&history, &window), (3, 3));
    assert_eq!(too_little_load(&history, &slow, &window), None);
}

#[test]
fn a_node_whose_clock_jumped_must_refuse_writes_once_it_noticed_naming_its_clock() {
    let (jump, _) = fault(FaultKind::ClockJump, 2, 10.0, 8.0);
    let problems = |history: &[Op]| {
        let mut problems = Vec::new();
        check_refusals(history, &jump, secs(10.0), secs(18.0), &mut problems);
        problems
    };
    let noticed = 10.0 + CLOCK_DETECTION.as_secs_f64();
    let refused = |message: &str| {
        put(
            2,
            noticed + 1.0,
            noticed + 1.1,
            Some(failure(FailureKind::Unavailable, message)),
        )
    };
    // Before it noticed, it may acknowledge; after, it refuses, saying why.
    let good = [
        put(2, 10.5, 10.6, None),
        refused("UNAVAILABLE: this node's clock is ahead of the majority's"),
        put(1, noticed + 1.0, noticed + 1.1, None),
    ];
    assert!(problems(&good).is_empty(), "{:?}", problems(&good));
    let acked = [put(2, noticed + 1.0, noticed + 1.1, None)];
    let found = problems(&acked);
    assert!(
        found
            .first()
            .is_some_and(|p| p.contains("acknowledged 1 writes")),
        "{found:?}"
    );
    let unnamed = [refused("UNAVAILABLE: try another node")];
    let found = problems(&unnamed);
    assert!(
        found.len() == 1 && found[0].contains("do not name its clock"),
        "{found:?}"
    );
}

/// A CAS on `key` through `node` over `[from, to]` seconds: answered, or
/// failed with `failed`, which a rival can cause or not.
fn cas(key: &str, node: usize, from: f64, to: f64, failed: Option<(Failure, bool)>) -> CasRecord {
    let (failure, contendable) = match failed {
        Some((failure, contendable)) => (Some(failure), contendable),
        None => (None, false),
    };
    CasRecord {
        coordinator: NodeId(node),
        key: key.into(),
        invoked: secs(from),
        completed: secs(to),
        failure,
        not_applied: false,
        contendable,
        register: None,
    }
}

#[test]
fn a_cas_refused_by_contention_is_excused_only_with_a_rival_on_its_key_meanwhile() {
    let unknown = || {
        let message =
            "DeadlineExceeded: the result is unknown: 1 of the 2 replicas needed accepted";
        Some((failure(FailureKind::Timeout, message), true))
    };
    let failed = cas("x000", 0, 10.0, 10.02, unknown());
    let alone = [failed.clone()];
    assert_eq!(excuse_contention(0, &alone), None, "no rival at all");
    let other_key = [failed.clone(), cas("x001", 1, 10.0, 10.02, None)];
    assert_eq!(
        excuse_contention(0, &other_key),
        None,
        "a rival on another key pre-empts nothing"
    );
    let before = [failed.clone(), cas("x000", 1, 9.0, 9.9, None)];
    assert_eq!(
        excuse_contention(0, &before),
        None,
        "a rival that ended before it began"
    );
    let raced = [failed, cas("x000", 1, 10.01, 10.03, None)];
    assert!(excuse_contention(0, &raced).is_some());
    let refused = cas(
        "x000",
        0,
        10.0,
        10.02,
        Some((
            failure(FailureKind::Unreachable, "connection refused"),
            false,
        )),
    );
    let raced = [refused, cas("x000", 1, 10.01, 10.03, None)];
    assert_eq!(
        excuse_contention(0, &raced),
        None,
        "a broken connection is no rival's doing"
    );
}
