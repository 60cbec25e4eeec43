//! Whether a run kept ringstore's promises: the history checker found
//! nothing, the CAS operations are linearizable, the load overlapped every
//! fault (at least [`MIN_LOAD_PER_FAULT`] writes acknowledged and reads
//! answered while it was active), every failed operation is excused by a
//! fault, and a node whose clock jumped refused writes.
//!
//! # Lightweight transactions
//! The CAS operations ([`crate::cas`]) are judged by the linearizability
//! checker, key by key, within [`CAS_BUDGET`](crate::scenario::CAS_BUDGET)
//! steps each. A key shown not linearizable fails the run with the
//! checker's counter-example. A key left undecided (its budget ran out)
//! fails it too, saying so: nothing was shown either way, and a run that
//! proves nothing about its CAS keys must not pass silently; the budget is
//! far above what a CI seed's keys need, so it means a history to make
//! smaller (fewer operations per key, or less concurrency), or a
//! violation the search could not isolate in time.
//!
//! A CAS operation that failed, whether of unknown outcome or certainly
//! not applied, is held to the same excuses as a plain one (below): with
//! one faulty node of RF 3, a quorum of the key's replicas is up and Paxos
//! needs no more, so a failure through a healthy coordinator outside a
//! fault's window is a failure of the run, a burst of `UNAVAILABLE`
//! included. One more excuse is the CAS's own: **contention**. The workers
//! send a key's operations through random coordinators (not through the
//! key's first replica, as the client library routes them), so rivals race
//! on purpose; a round refused by a rival's newer promise after part of it
//! was accepted must answer "unknown" (`DEADLINE_EXCEEDED`, CASSANDRA-6013),
//! and an operation pre-empted, or queued behind a slow one on its
//! coordinator, until its time runs out is `ABORTED`. Either is excused
//! when another CAS operation on the same key overlapped it, and never
//! otherwise; the excuses are counted in the verdict, so that a run where
//! contention collapses shows. A run must also have decided at least
//! [`MIN_CAS_DECIDED`] CAS operations (applied, not applied, or read), so
//! that a run whose CAS load silently failed does not pass.
//!
//! # Which failures a fault excuses
//! One faulty node of RF 3 leaves a quorum of every key, so an operation
//! through a healthy coordinator must succeed, except:
//! - through the faulty node itself, while it is faulty and until it has
//!   recovered (see `recovery`: a restarted node takes a moment to serve);
//! - a timeout while the others have not yet marked an unresponsive node
//!   down ([`DETECTION`] after the fault began): a read may wait for it;
//! - a timeout after a fault healed, until its node has recovered;
//! - `UNAVAILABLE` just after a node cut off from the others is back: while
//!   cut off it declared the others down (SWIM), and when it is back that
//!   verdict reaches them, so each sees the others down until they rejoin
//!   under a new identity (a few seconds: [`REJOIN`]). A known weakness of SWIM that
//!   Lifeguard's local health awareness addresses and foca does not have;
//! - through the node being decommissioned (requests sent to it just
//!   before the workers stopped using it);
//! - after a one-way drop, any failure until the connections it stalled
//!   are dropped by their keep-alive and made again: one of them breaking
//!   fails the requests on it at once, which with another fault under way
//!   leaves fewer than a quorum.
//!
//! Anything else is a failure of the run: in a simulation there is no
//! loaded machine to blame.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use ringstore_history::{Failure, FailureKind, FaultWindow, NodeId, Op};

use crate::cas::CasRecord;
use crate::faults::{Fault, FaultKind};
use crate::net::TurmoilTransport;
use crate::scenario::Outcome;

/// How long the others take to mark an unresponsive node down (LAN
/// failure detection: a 1 s probe period, suspected for 4 s), plus a
/// second of slack.
pub const DETECTION: Duration = Duration::from_secs(6);
/// How long after a fault heals requests may still fail.
pub const HEAL_GRACE: Duration = Duration::from_secs(3);
/// How long after a node cut off from the others is back the members it
/// declared down may still be seen down by the others (each must learn it
/// was declared down and rejoin, a probe period or two a step).
pub const REJOIN: Duration = Duration::from_secs(8);
/// How long a node whose clock jumped may take to notice and refuse
/// writes (a probe or two: the last five probes count, the fastest wins).
pub const CLOCK_DETECTION: Duration = Duration::from_secs(3);
/// Fewer acknowledged writes than this: the run tried too little.
const MIN_ACKED_WRITES: usize = 100;
/// Fewer CAS operations answered than this (in a run with CAS load): the
/// run tried too little of them.
pub const MIN_CAS_DECIDED: usize = 50;
/// Writes acknowledged and reads answered, each, that must overlap every
/// fault (as the process suite asks): a fault no load saw tested nothing.
pub const MIN_LOAD_PER_FAULT: usize = 3;

/// What was judged, for the report of a passing run.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Failed operations excused, by reason.
    pub excused: BTreeMap<&'static str, usize>,
}

/// Judges `outcome`; the error tells every broken promise.
pub fn judge(outcome: &Outcome) -> Result<Verdict, String> {
    let mut problems = Vec::new();
    if !outcome.report.is_ok() {
        problems.push(format!("the history checker failed: {}", outcome.report));
    }
    if outcome.report.writes_acked < MIN_ACKED_WRITES {
        problems.push(format!(
            "too little load: {} writes acknowledged",
            outcome.report.writes_acked
        ));
    }
    for (fault, window) in outcome.faults.iter().zip(&outcome.windows) {
        problems.extend(too_little_load(&outcome.history, fault, window));
        if fault.kind == FaultKind::ClockJump {
            let until = window.until.unwrap_or(window.from);
            check_refusals(&outcome.history, fault, window.from, until, &mut problems);
        }
    }
    problems.extend(linearizability(outcome));
    let mut verdict = Verdict::default();
    let mut unexcused = Vec::new();
    let failed_ops = outcome.history.iter().filter_map(|op| {
        let failure = op.failure()?;
        Some((Failed::of(op, failure), format!("{op:?}")))
    });
    for (failed, text) in failed_ops {
        match excuse_failure(
            &failed,
            &outcome.faults,
            &outcome.windows,
            &outcome.topology,
        ) {
            Some(why) => *verdict.excused.entry(why).or_default() += 1,
            None => unexcused.push(text),
        }
    }
    for (index, record) in outcome.cas.iter().enumerate() {
        let Some(failure) = &record.failure else {
            continue;
        };
        let failed = Failed {
            coordinator: record.coordinator,
            invoked: record.invoked,
            completed: record.completed,
            failure,
        };
        let why = excuse_failure(
            &failed,
            &outcome.faults,
            &outcome.windows,
            &outcome.topology,
        )
        .or_else(|| excuse_contention(index, &outcome.cas));
        match why {
            Some(why) => *verdict.excused.entry(why).or_default() += 1,
            None => unexcused.push(format!("CAS {record:?}")),
        }
    }
    if !unexcused.is_empty() {
        let mut text = format!(
            "{} operations failed that no fault excuses (one faulty node of RF 3 leaves a quorum):",
            unexcused.len()
        );
        for op in unexcused.iter().take(20) {
            let _ = write!(text, "\n  {op}");
        }
        problems.push(text);
    }
    if problems.is_empty() {
        Ok(verdict)
    } else {
        Err(problems.join("\n"))
    }
}

/// What the linearizability checker and the CAS load's size say is wrong:
/// each key not linearizable (with its counter-example), each undecided,
/// too few operations decided.
fn linearizability(outcome: &Outcome) -> Vec<String> {
    let mut problems = Vec::new();
    let report = &outcome.linearizability;
    if report.counterexamples().next().is_some() {
        problems.push(format!("the CAS operations are not linearizable: {report}"));
    } else if report.undecided().next().is_some() {
        problems.push(format!(
            "the linearizability checker could not decide every CAS key within its budget \
             (make the history smaller: fewer CAS operations per key): {report}"
        ));
    }
    if outcome.scenario.cas.keys > 0 {
        let decided = outcome.cas.iter().filter(|r| r.succeeded()).count();
        if decided < MIN_CAS_DECIDED {
            problems.push(format!(
                "too little CAS load: {decided} CAS operations answered (at least \
                 {MIN_CAS_DECIDED})"
            ));
        }
    }
    problems
}

/// Why the failed CAS `all[index]` is excused by contention (see the
/// module docs), if it is: the node's answer is one a rival can cause, and
/// another CAS operation in `all` on the same key overlapped it.
fn excuse_contention(index: usize, all: &[CasRecord]) -> Option<&'static str> {
    let record = &all[index];
    let rival = all.iter().enumerate().any(|(i, other)| {
        i != index
            && other.key == record.key
            && other.invoked <= record.completed
            && other.completed >= record.invoked
    });
    (record.contendable && rival).then_some("a CAS pre-empted or queued behind a rival on its key")
}

/// A failed operation, plain or CAS, as the excuses see it.
struct Failed<'a> {
    coordinator: NodeId,
    invoked: Duration,
    completed: Duration,
    failure: &'a Failure,
}

impl<'a> Failed<'a> {
    fn of(op: &Op, failure: &'a Failure) -> Failed<'a> {
        Failed {
            coordinator: op.coordinator,
            invoked: op.invoked,
            completed: op.completed,
            failure,
        }
    }
}

/// Why the load did not test `fault` (active over `window`), if it did
/// not: fewer than [`MIN_LOAD_PER_FAULT`] writes acknowledged or reads
/// answered meanwhile.
fn too_little_load(history: &[Op], fault: &Fault, window: &FaultWindow) -> Option<String> {
    let (writes, reads) = load_within(history, window);
    (writes < MIN_LOAD_PER_FAULT || reads < MIN_LOAD_PER_FAULT).then(|| {
        format!(
            "the load did not overlap {fault}: {writes} writes acknowledged, {reads} reads \
             answered (at least {MIN_LOAD_PER_FAULT} of each)"
        )
    })
}

/// The operations that succeeded while `window` was active (at any time
/// of their life): writes acknowledged (every part of a batch), and reads
/// answered.
fn load_within(history: &[Op], window: &FaultWindow) -> (usize, usize) {
    let succeeded = history
        .iter()
        .filter(|op| window.overlaps(op.invoked, op.completed) && op.succeeded());
    succeeded.fold((0, 0), |(writes, reads), op| {
        if op.is_write() {
            (writes + 1, reads)
        } else {
            (writes, reads + 1)
        }
    })
}

/// Why the faults (each with its window in the run's times) or the changes
/// of topology excuse `failed`, if they do.
fn excuse_failure(
    failed: &Failed<'_>,
    faults: &[Fault],
    windows: &[FaultWindow],
    topology: &[FaultWindow],
) -> Option<&'static str> {
    let failure = failed.failure;
    let during = |from: Duration, to: Duration| failed.invoked <= to && failed.completed >= from;
    for change in topology {
        let until = change.until.unwrap_or(change.from);
        if failed.coordinator == change.node && during(change.from, until + HEAL_GRACE) {
            return Some("through the node being decommissioned");
        }
    }
    let slow = matches!(
        failure.kind,
        FailureKind::Timeout | FailureKind::ClientTimeout
    );
    for (fault, window) in faults.iter().zip(windows) {
        let until = window.until.unwrap_or(window.from);
        let recovered = until + recovery(fault);
        if failed.coordinator.0 == fault.node && during(window.from, recovered) {
            return Some("through the faulty node");
        }
        let stalls = matches!(
            fault.kind,
            FaultKind::DropOutgoing | FaultKind::DropIncoming
        );
        if stalls && failure.kind != FailureKind::Other && during(window.from, recovered) {
            return Some("a connection the one-way drop stalled, until its keep-alive gave up");
        }
        if fault.kind.makes_unresponsive() && slow && during(window.from, window.from + DETECTION) {
            return Some("a timeout before the unresponsive node was marked down");
        }
        if slow && during(until, recovered) {
            return Some("a timeout while the healed node recovered");
        }
        let unavailable = failure.kind == FailureKind::Unavailable;
        if fault.kind.isolates() && unavailable && during(until, until + REJOIN) {
            return Some("the isolated node's stale down verdicts, until their subjects rejoined");
        }
    }
    None
}

/// How long after `fault` healed its node may still fail requests: a
/// moment to work off what queued up; after a one-way drop, until the
/// connections it stalled are dropped by their keep-alive and made again
/// (turmoil's TCP does not retransmit what was lost; real TCP would,
/// sooner); after a clock jump, until the node's clock has passed the
/// timestamps it issued while it ran ahead.
fn recovery(fault: &Fault) -> Duration {
    match fault.kind {
        FaultKind::DropOutgoing | FaultKind::DropIncoming => {
            TurmoilTransport::KEEPALIVE.detection() + HEAL_GRACE
        }
        FaultKind::ClockJump => fault.amount + HEAL_GRACE,
        _ => HEAL_GRACE,
    }
}

/// A node whose clock jumped past the bound must refuse to coordinate
/// writes once it noticed, naming its clock.
fn check_refusals(
    history: &[Op],
    fault: &Fault,
    from: Duration,
    until: Duration,
    problems: &mut Vec<String>,
) {
    let noticed = from + CLOCK_DETECTION;
    let writes: Vec<&Op> = history
        .iter()
        .filter(|op| op.coordinator.0 == fault.node && op.invoked >= noticed)
        .filter(|op| op.completed <= until)
        .filter(|op| op.is_write())
        .collect();
    let acked: Vec<&&Op> = writes
        .iter()
        .filter(|op| op.writes().iter().any(|w| w.acked().is_some()))
        .collect();
    if let Some(op) = acked.first() {
        problems.push(format!(
            "node{} acknowledged {} writes {CLOCK_DETECTION:?} or more after its clock jumped \
             ({fault}), e.g. {op:?}",
            fault.node,
            acked.len()
        ));
    }
    let named = writes
        .iter()
        .filter_map(|op| op.failure())
        .any(|failure| failure.message.contains("clock"));
    if !writes.is_empty() && !named {
        problems.push(format!(
            "node{}'s refusals after its clock jumped ({fault}) do not name its clock",
            fault.node
        ));
    }
}

/// The run second by second, for a failure report: per second of the run,
/// the operations completed through each node, answered (`ok`) and failed,
/// and the faults active.
pub fn timeline(outcome: &Outcome) -> String {
    let nodes = outcome.scenario.nodes;
    let last = outcome
        .history
        .iter()
        .map(|op| op.completed.as_secs())
        .max()
        .unwrap_or(0);
    let mut text = String::from("second | per node: ok/failed | faults active\n");
    for second in 0..=last {
        let (from, to) = (Duration::from_secs(second), Duration::from_secs(second + 1));
        let mut cells = Vec::new();
        for node in 0..nodes {
            let ops = outcome
                .history
                .iter()
                .filter(|op| op.coordinator.0 == node && op.completed >= from && op.completed < to);
            let (ok, failed) = ops.fold((0, 0), |(ok, failed), op| {
                if op.failure().is_some() {
                    (ok, failed + 1)
                } else {
                    (ok + 1, failed)
                }
            });
            cells.push(format!("{ok:>3}/{failed:<3}"));
        }
        if cells.iter().all(|c| c.trim() == "0/0") {
            continue;
        }
        let active: Vec<String> = outcome
            .faults
            .iter()
            .zip(&outcome.windows)
            .filter(|(_, w)| w.overlaps(from, to))
            .map(|(f, _)| format!("{:?} node{}", f.kind, f.node))
            .collect();
        let _ = writeln!(
            text,
            "{second:>5}s | {} | {}",
            cells.join(" "),
            active.join(", ")
        );
    }
    text
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
