//! The checks of a whole history, key by key (see the crate's essay for
//! what each one promises and why it is sound).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use crate::history::{FaultWindow, FinalKey, Op, OpKind};
use crate::key::KeyCheck;
use crate::violation::Violation;

/// What to check, and what the run promises that the checks rely on.
#[derive(Clone, Debug)]
pub struct Checks {
    /// The keyspace's replication factor (what R + W > RF is judged by).
    pub replication_factor: u32,
    /// Check that reads are monotonic (`NonMonotonic`): what a read
    /// returned, a later read at an overlapping level returns too, or
    /// something newer.
    pub monotonic_reads: bool,
    /// When ranges moved (joins, decommissions): a read that overlaps one
    /// binds no later read (see the essay: read repair does not write to
    /// pending replicas).
    pub range_movements: Vec<FaultWindow>,
    /// How far apart the nodes' clocks may be: what TTLs are judged by,
    /// and the order of writes apart in real time.
    pub clocks: ClockBound,
    /// The longest after its client sent a write that a node may still
    /// stamp it, on the clients' clock (the client's timeout, plus
    /// `max_clock_offset` that nodes allow it, plus how far a node's clock
    /// may be behind the clients'): a failed write the coordinator did not
    /// answer is stamped, if at all, by then. `None`: nodes keep no such
    /// deadline, and such a write may be stamped any time.
    pub stamp_deadline: Option<Duration>,
    /// Check that writes further apart than the clock bound are ordered as
    /// they happened (`Reordered`), and that a write told failed never
    /// overwrites its client's later acknowledged write (`LateWrite`).
    pub write_order: bool,
}

/// How far apart the nodes' clocks may be, and when a node's was pushed
/// further.
#[derive(Clone, Debug)]
pub struct ClockBound {
    /// How far apart two nodes' clocks may be, each measured against the
    /// clients' clock, at any two times of the run: `|(a(s) - s) - (b(t) -
    /// t)|` for nodes `a`, `b` and times `s`, `t`. Twice
    /// `max_clock_offset` when each node may be that far off in either
    /// direction (the simulation); next to nothing when every node and
    /// client read one machine's clock (the process suite).
    pub bound: Duration,
    /// Faults during which a node's clock was deliberately past the bound:
    /// the writes it coordinated meanwhile (before it noticed and refused)
    /// are not judged by their time, nor the TTLs of reads it coordinated.
    pub exempt: Vec<FaultWindow>,
}

/// What [`check`] found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Keys with at least one operation or a final state.
    pub keys: usize,
    /// Writes acknowledged (each of a batch's parts counts as one).
    pub writes_acked: usize,
    /// Writes that failed (indeterminate; batches' parts included).
    pub writes_failed: usize,
    /// Reads that answered.
    pub reads_ok: usize,
    /// Reads that failed.
    pub reads_failed: usize,
    /// Reads that returned an indeterminate write (one that failed).
    pub reads_of_failed_writes: usize,
    /// Reads that found nothing.
    pub reads_not_found: usize,
    /// Deletes acknowledged (batches' parts included).
    pub deletes_acked: usize,
    /// Values with a TTL acknowledged (batches' parts included).
    pub ttl_writes_acked: usize,
    /// Batches (each part is also counted as a write).
    pub batches: usize,
    /// Every violation, key by key.
    pub violations: Vec<Violation>,
}

impl CheckReport {
    /// Whether no promise was broken.
    pub fn is_ok(&self) -> bool {
        self.violations.is_empty()
    }
}

impl fmt::Display for CheckReport {
    /// One line of counts, then each violation (at most 20).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} keys, {} writes acknowledged ({} deletes, {} with a TTL; {} batches), {} failed \
             (indeterminate), {} reads answered ({} found nothing, {} returned a failed write), \
             {} failed; {} violations",
            self.keys,
            self.writes_acked,
            self.deletes_acked,
            self.ttl_writes_acked,
            self.batches,
            self.writes_failed,
            self.reads_ok,
            self.reads_not_found,
            self.reads_of_failed_writes,
            self.reads_failed,
            self.violations.len()
        )?;
        for violation in self.violations.iter().take(20) {
            write!(f, "\n  {violation}")?;
        }
        if self.violations.len() > 20 {
            write!(f, "\n  … and {} more", self.violations.len() - 20)?;
        }
        Ok(())
    }
}

/// Checks `history` against the `finals` (one per key) read after healing;
/// `faults` are named in the violations they overlap.
pub fn check(
    history: &[Op],
    finals: &[FinalKey],
    faults: &[FaultWindow],
    checks: &Checks,
) -> CheckReport {
    let mut by_key: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, op) in history.iter().enumerate() {
        let mut keys = op.keys();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            by_key.entry(key).or_default().push(index);
        }
    }
    // Each key's operations in invoke order (what "first seen" and "an
    // earlier read" mean), whatever the history's order.
    for ops in by_key.values_mut() {
        ops.sort_by_key(|&i| (history[i].invoked, i));
    }
    let finals: HashMap<&str, &FinalKey> = finals.iter().map(|f| (f.key.as_str(), f)).collect();
    let mut keys: Vec<&str> = by_key.keys().copied().collect();
    keys.extend(finals.keys().filter(|k| !by_key.contains_key(*k)));
    keys.sort_unstable();

    let mut report = CheckReport {
        keys: keys.len(),
        ..CheckReport::default()
    };
    count(history, &mut report);
    for key in keys {
        let ops = by_key.get(key).map_or(&[][..], Vec::as_slice);
        let last = finals.get(key).copied();
        let mut key_check = KeyCheck::new(key, history, ops, last, faults, checks, &mut report);
        key_check.reads();
        key_check.real_time_order();
        key_check.late_writes();
        key_check.final_state(last);
    }
    report
}

/// The report's counts of operations.
fn count(history: &[Op], report: &mut CheckReport) {
    for op in history {
        if let OpKind::Batch(_) = op.kind {
            report.batches += 1;
        }
        for write in op.writes() {
            if write.acked().is_none() {
                report.writes_failed += 1;
                continue;
            }
            report.writes_acked += 1;
            if write.is_delete() {
                report.deletes_acked += 1;
            }
            if write.ttl().is_some() {
                report.ttl_writes_acked += 1;
            }
        }
        match op.read_result() {
            Some(_) => report.reads_ok += 1,
            None if !op.is_write() => report.reads_failed += 1,
            None => {}
        }
    }
}
