//! One key's part of a history, as every check of the key sees it: its
//! operations, its writes (a batch's parts among them) with what is known
//! of each, and how a violation about it is told.

use std::collections::HashMap;
use std::time::Duration;

use crate::check::{CheckReport, Checks};
use crate::history::{FaultWindow, FinalKey, Level, NodeId, Op, ReadOutcome, Timestamp, Version};
use crate::order::KeyWrite;
use crate::violation::{Violation, ViolationKind};

/// The checks of one key (see `reads.rs`, `final_state.rs`,
/// `write_order.rs`).
pub(crate) struct KeyCheck<'a> {
    pub key: &'a str,
    pub history: &'a [Op],
    /// The key's operations, as indices into `history`, in invoke order
    /// (then history order).
    pub ops: &'a [usize],
    /// Its writes, in invoke order.
    pub writes: Vec<KeyWrite<'a>>,
    /// Each value put, and its write (an index into `writes`).
    pub values: HashMap<&'a [u8], usize>,
    pub faults: &'a [FaultWindow],
    pub checks: &'a Checks,
    pub report: &'a mut CheckReport,
}

impl<'a> KeyCheck<'a> {
    /// The key's writes, each failed one's timestamp taken from where it
    /// was first seen: the reads in invoke order, then the final state.
    pub fn new(
        key: &'a str,
        history: &'a [Op],
        ops: &'a [usize],
        last: Option<&'a FinalKey>,
        faults: &'a [FaultWindow],
        checks: &'a Checks,
        report: &'a mut CheckReport,
    ) -> KeyCheck<'a> {
        let mut writes = Vec::new();
        for &index in ops {
            let op = &history[index];
            for write in op.writes().iter().filter(|w| w.key == key) {
                let exempt = is_exempt(checks, op);
                let known = KeyWrite::new(index, op, write, checks.stamp_deadline, exempt);
                writes.push(known);
            }
        }
        let values: HashMap<&[u8], usize> = writes
            .iter()
            .enumerate()
            .filter_map(|(i, w)| Some((w.write.value()?, i)))
            .collect();
        let read = ops.iter().filter_map(|&i| history[i].read_result()?);
        let held = last.into_iter().flat_map(|last| {
            let all = match &last.read_all {
                ReadOutcome::Found(version) => Some((version.value.as_slice(), version.timestamp)),
                _ => None,
            };
            let cells = last.replicas.iter().filter_map(|(_, cell)| {
                let cell = cell.as_ref()?;
                Some((cell.value.as_deref()?, cell.timestamp))
            });
            all.into_iter().chain(cells)
        });
        let sightings = read
            .map(|v: &Version| (v.value.as_slice(), v.timestamp))
            .chain(held);
        for (value, timestamp) in sightings {
            if let Some(&w) = values.get(value)
                && writes[w].timestamp.is_none()
            {
                writes[w].timestamp = Some(timestamp);
            }
        }
        KeyCheck {
            key,
            history,
            ops,
            writes,
            values,
            faults,
            checks,
            report,
        }
    }

    /// Records a violation about the operations `ops` (history indices).
    pub fn violation(
        &mut self,
        kind: ViolationKind,
        what: String,
        ops: &[usize],
        node: Option<NodeId>,
    ) {
        let mut ops: Vec<(usize, &Op)> = ops.iter().map(|&i| (i, &self.history[i])).collect();
        ops.dedup_by_key(|(i, _)| *i);
        self.report.violations.push(Violation::new(
            kind,
            self.key,
            what,
            &ops,
            node,
            self.faults,
        ));
    }

    /// Whether levels `a` and `b` overlap: R + W > RF.
    pub fn overlap(&self, a: Level, b: Level) -> bool {
        let rf = self.checks.replication_factor;
        a.replicas(rf) + b.replicas(rf) > rf
    }

    /// How far apart the nodes' clocks may be.
    pub fn bound(&self) -> Duration {
        self.checks.clocks.bound
    }

    /// Whether `op`'s coordinator had its clock pushed past the bound
    /// while `op` ran.
    pub fn exempt(&self, op: &Op) -> bool {
        is_exempt(self.checks, op)
    }

    /// The write `version` came from (an index into `writes`), or a
    /// phantom violation (about `seen`, the read that returned it, if any)
    /// and `None`.
    pub fn origin(
        &mut self,
        version: &Version,
        seen: Option<usize>,
        where_: &str,
    ) -> Option<usize> {
        let reported: Vec<usize> = seen.into_iter().collect();
        let Some(&w) = self.values.get(version.value.as_slice()) else {
            let what = format!("{where_} {version}, which no client wrote to this key");
            self.violation(ViolationKind::Phantom, what, &reported, None);
            return None;
        };
        let written = &self.writes[w];
        let mut involved = reported.clone();
        involved.push(written.op_index);
        if let Some(read) = seen.map(|r| &self.history[r])
            && written.op.invoked > read.completed
        {
            let what = format!("{where_} {version} before its write was sent");
            self.violation(ViolationKind::Phantom, what, &involved, None);
            return None;
        }
        if let Some(stamped) = written.timestamp
            && stamped != version.timestamp
        {
            let how = if written.write.acked().is_some() {
                "acknowledged"
            } else {
                "first seen"
            };
            let what = format!(
                "{where_} {version}, but its write was {how} at timestamp {}",
                stamped.0
            );
            self.violation(ViolationKind::Phantom, what, &involved, None);
            return None;
        }
        Some(w)
    }

    /// The writes that could hide the key from a read that ended at `at`
    /// (through a coordinator whose clock was pushed, if `exempt_reader`):
    /// deletes and values whose TTL may have run out, sent by then (indices
    /// into `writes`).
    pub fn hiding(&self, at: Duration, exempt_reader: bool) -> Vec<usize> {
        (0..self.writes.len())
            .filter(|&h| self.writes[h].may_hide(at, self.bound(), exempt_reader))
            .collect()
    }

    /// The acknowledged delete `cell_timestamp` names, or whether any
    /// failed delete (timestamp unknown) could be it.
    pub fn explains_tombstone(&self, cell_timestamp: Timestamp) -> bool {
        self.writes.iter().any(|w| {
            w.write.is_delete() && w.timestamp.is_none_or(|stamped| stamped == cell_timestamp)
        })
    }
}

/// Whether `op`'s coordinator had its clock pushed past the bound while
/// `op` ran.
fn is_exempt(checks: &Checks, op: &Op) -> bool {
    checks
        .clocks
        .exempt
        .iter()
        .any(|fault| fault.node == op.coordinator && fault.overlaps(op.invoked, op.completed))
}
