//! The checks of a whole history, key by key (see the crate's essay for
//! what each one promises and why it is sound).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use crate::history::{FaultWindow, FinalKey, Level, Op, OpKind, ReadOutcome, Version};
use crate::violation::{Violation, ViolationKind, show};

/// What to check.
#[derive(Clone, Debug)]
pub struct Checks {
    /// The keyspace's replication factor (what R + W > RF is judged by).
    pub replication_factor: u32,
    /// Check that reads are monotonic across clients (see the essay: off
    /// for runs in which ranges move).
    pub monotonic_reads: bool,
    /// Check that writes further apart than the clock bound are ordered
    /// as they happened (see the essay); `None`: not checked.
    pub clock_bound: Option<ClockBound>,
}

/// The clock bound the nodes keep, and the writes it does not cover.
#[derive(Clone, Debug)]
pub struct ClockBound {
    /// How far apart two coordinators' clocks may be: `max_clock_offset`
    /// when one node's clock is off, twice it when two may be off in
    /// opposite directions.
    pub bound: Duration,
    /// Faults during which a node's clock was deliberately past the bound:
    /// the writes it coordinated meanwhile (before it noticed and refused)
    /// are not judged.
    pub exempt: Vec<FaultWindow>,
}

/// What [`check`] found.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Keys with at least one operation or a final state.
    pub keys: usize,
    /// Writes acknowledged.
    pub writes_acked: usize,
    /// Writes that failed (indeterminate).
    pub writes_failed: usize,
    /// Reads that answered.
    pub reads_ok: usize,
    /// Reads that failed.
    pub reads_failed: usize,
    /// Reads that returned an indeterminate write (one that failed).
    pub reads_of_failed_writes: usize,
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
            "{} keys, {} writes acknowledged, {} failed (indeterminate), {} reads answered \
             ({} of them returned a failed write), {} failed; {} violations",
            self.keys,
            self.writes_acked,
            self.writes_failed,
            self.reads_ok,
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
        by_key.entry(op.key.as_str()).or_default().push(index);
    }
    let finals: HashMap<&str, &FinalKey> = finals.iter().map(|f| (f.key.as_str(), f)).collect();
    let mut keys: Vec<&str> = by_key.keys().copied().collect();
    keys.extend(finals.keys().filter(|k| !by_key.contains_key(*k)));
    keys.sort_unstable();

    let mut report = CheckReport {
        keys: keys.len(),
        ..CheckReport::default()
    };
    for op in history {
        match &op.kind {
            OpKind::Write { .. } if op.acked_version().is_some() => report.writes_acked += 1,
            OpKind::Write { .. } => report.writes_failed += 1,
            OpKind::Read { .. } if op.read_result().is_some() => report.reads_ok += 1,
            OpKind::Read { .. } => report.reads_failed += 1,
        }
    }
    for key in keys {
        let ops = by_key.get(key).map_or(&[][..], Vec::as_slice);
        let mut key_check = KeyCheck {
            key,
            history,
            ops,
            faults,
            checks,
            writes: ops
                .iter()
                .filter_map(|&i| match &history[i].kind {
                    OpKind::Write { value, .. } => Some((value.as_slice(), i)),
                    OpKind::Read { .. } => None,
                })
                .collect(),
            report: &mut report,
        };
        key_check.reads();
        key_check.real_time_order();
        key_check.late_writes(finals.get(key).copied());
        key_check.final_state(finals.get(key).copied());
    }
    report
}

/// The checks of one key.
struct KeyCheck<'a> {
    key: &'a str,
    history: &'a [Op],
    /// The key's operations, as indices into `history`.
    ops: &'a [usize],
    faults: &'a [FaultWindow],
    checks: &'a Checks,
    /// Each value written to the key, and its write.
    writes: HashMap<&'a [u8], usize>,
    report: &'a mut CheckReport,
}

impl<'a> KeyCheck<'a> {
    fn violation(
        &mut self,
        kind: ViolationKind,
        what: String,
        ops: &[usize],
        node: Option<crate::NodeId>,
    ) {
        let ops: Vec<(usize, &Op)> = ops.iter().map(|&i| (i, &self.history[i])).collect();
        self.report.violations.push(Violation::new(
            kind,
            self.key,
            what,
            &ops,
            node,
            self.faults,
        ));
    }

    fn overlap(&self, a: Level, b: Level) -> bool {
        let rf = self.checks.replication_factor;
        a.replicas(rf) + b.replicas(rf) > rf
    }

    /// The write `version` came from, or a phantom violation (about `seen`,
    /// the read that returned it, if any) and `None`.
    fn origin(&mut self, version: &Version, seen: Option<usize>, where_: &str) -> Option<usize> {
        let reported: Vec<usize> = seen.into_iter().collect();
        let Some(&write) = self.writes.get(version.value.as_slice()) else {
            let what = format!("{where_} {version}, which no client wrote to this key");
            self.violation(ViolationKind::Phantom, what, &reported, None);
            return None;
        };
        let written = &self.history[write];
        let mut involved = reported.clone();
        involved.push(write);
        if let Some(read) = seen.map(|r| &self.history[r])
            && written.invoked > read.completed
        {
            let what = format!("{where_} {version} before its write was sent");
            self.violation(ViolationKind::Phantom, what, &involved, None);
            return None;
        }
        if let Some(acked) = written.acked_version()
            && acked.timestamp != version.timestamp
        {
            let what = format!(
                "{where_} {version}, but its write was acknowledged at timestamp {}",
                acked.timestamp.0
            );
            self.violation(ViolationKind::Phantom, what, &involved, None);
            return None;
        }
        Some(write)
    }

    /// Phantom, stale and non-monotonic reads.
    fn reads(&mut self) {
        let reads: Vec<(usize, Option<Version>)> = self
            .ops
            .iter()
            .filter_map(|&i| Some((i, self.history[i].read_result()?.cloned())))
            .collect();
        for &(read, ref result) in &reads {
            let op = &self.history[read];
            if let Some(version) = result
                && let Some(write) = self.origin(version, Some(read), "read returned")
                && self.history[write].acked_version().is_none()
            {
                self.report.reads_of_failed_writes += 1;
            }
            // The newest write acknowledged before the read began.
            let floor = self
                .ops
                .iter()
                .filter(|&&w| {
                    let write = &self.history[w];
                    write.completed < op.invoked && self.overlap(write.level, op.level)
                })
                .filter_map(|&w| Some((self.history[w].acked_version()?, w)))
                .max();
            if let Some((floor, write)) = floor
                && result.as_ref() < Some(&floor)
            {
                let what = format!(
                    "a read returned {} after {floor} was acknowledged",
                    show(result.as_ref())
                );
                self.violation(ViolationKind::Stale, what, &[read, write], None);
                continue;
            }
            if !self.checks.monotonic_reads {
                continue;
            }
            // The newest value a read answered before this one began.
            let earlier = reads
                .iter()
                .filter(|(r, _)| {
                    let other = &self.history[*r];
                    other.completed < op.invoked && self.overlap(other.level, op.level)
                })
                .filter_map(|(r, v)| Some((v.as_ref()?, *r)))
                .max();
            if let Some((earlier, other)) = earlier
                && result.as_ref() < Some(earlier)
            {
                let what = format!(
                    "a read returned {} after another read had returned {earlier}",
                    show(result.as_ref())
                );
                self.violation(ViolationKind::NonMonotonic, what, &[read, other], None);
            }
        }
    }

    /// Writes further apart than the clock bound that last-write-wins put
    /// in the wrong order: the later one has the lower timestamp.
    fn real_time_order(&mut self) {
        let Some(clock) = self.checks.clock_bound.clone() else {
            return;
        };
        let judged: Vec<(usize, Version)> = self
            .ops
            .iter()
            .filter_map(|&w| Some((w, self.history[w].acked_version()?)))
            .filter(|(w, _)| {
                let op = &self.history[*w];
                !clock.exempt.iter().any(|fault| {
                    fault.node == op.coordinator && fault.overlaps(op.invoked, op.completed)
                })
            })
            .collect();
        for (earlier, first) in &judged {
            let done = self.history[*earlier].completed;
            let overtaken = judged.iter().find(|(later, second)| {
                self.history[*later].invoked > done + clock.bound
                    && second.timestamp <= first.timestamp
            });
            if let Some((later, second)) = overtaken {
                let what = format!(
                    "{second} was written more than the clock bound ({:?}) after {first} was \
                     acknowledged, yet has the lower timestamp: last-write-wins put it behind",
                    clock.bound
                );
                self.violation(ViolationKind::Reordered, what, &[*earlier, *later], None);
            }
        }
    }

    /// Writes a client was told failed that came back above a write the
    /// same client made more than the clock bound after the failure and saw
    /// acknowledged: the late write overwrote the acknowledged one.
    fn late_writes(&mut self, last: Option<&FinalKey>) {
        let Some(clock) = self.checks.clock_bound.clone() else {
            return;
        };
        // Every version seen of a failed write: read, or held at the end.
        let mut seen: Vec<(Version, usize)> = Vec::new();
        let reads = self
            .ops
            .iter()
            .filter_map(|&r| self.history[r].read_result());
        let finals = last.into_iter().flat_map(|last| {
            let all = match &last.read_all {
                ReadOutcome::Found(version) => Some(version),
                _ => None,
            };
            all.into_iter()
                .chain(last.replicas.iter().filter_map(|(_, held)| held.as_ref()))
        });
        for version in reads.flatten().chain(finals) {
            if let Some(&write) = self.writes.get(version.value.as_slice())
                && self.history[write].acked_version().is_none()
                && !seen.iter().any(|(_, w)| *w == write)
            {
                seen.push((version.clone(), write));
            }
        }
        for (late, failed) in seen {
            let op = &self.history[failed];
            let exempt = clock.exempt.iter().any(|fault| {
                fault.node == op.coordinator && fault.overlaps(op.invoked, op.completed)
            });
            if exempt {
                continue;
            }
            let overwritten = self.ops.iter().find_map(|&w| {
                let later = &self.history[w];
                let acked = later.acked_version()?;
                (later.client == op.client
                    && later.invoked > op.completed + clock.bound
                    && acked < late)
                    .then_some((w, acked))
            });
            if let Some((later, acked)) = overwritten {
                let what = format!(
                    "{late}, written by a request its client was told failed, overwrote {acked}, \
                     which the same client wrote more than the clock bound ({:?}) after the \
                     failure and saw acknowledged",
                    clock.bound
                );
                self.violation(ViolationKind::LateWrite, what, &[failed, later], None);
            }
        }
    }

    /// Lost writes, phantoms in the final state, divergent replicas.
    fn final_state(&mut self, last: Option<&FinalKey>) {
        let rf = self.checks.replication_factor;
        let quorum = Level::Quorum.replicas(rf);
        let durable: Vec<(Version, usize)> = self
            .ops
            .iter()
            .filter(|&&w| self.history[w].level.replicas(rf) >= quorum)
            .filter_map(|&w| Some((self.history[w].acked_version()?, w)))
            .collect();
        let Some(last) = last else {
            if !durable.is_empty() {
                let what = "no final state was recorded for a key with acknowledged writes";
                self.violation(ViolationKind::Unreadable, what.to_string(), &[], None);
            }
            return;
        };
        let final_version = match &last.read_all {
            ReadOutcome::Found(version) => Some(version.clone()),
            ReadOutcome::NotFound => None,
            ReadOutcome::Failed(failure) => {
                let what = format!("the final read at ALL failed: {failure}");
                self.violation(ViolationKind::Unreadable, what, &[], None);
                return;
            }
        };
        if let Some(version) = &final_version {
            self.origin(version, None, "the final read at ALL returned");
        }
        for (version, write) in &durable {
            if final_version.as_ref() < Some(version) {
                let what = format!(
                    "the final read at ALL returned {}, older than the acknowledged {version}",
                    show(final_version.as_ref())
                );
                let behind = last
                    .replicas
                    .iter()
                    .find(|(_, held)| held.as_ref() < Some(version))
                    .map(|(node, _)| *node);
                self.violation(ViolationKind::Lost, what, &[*write], behind);
            }
        }
        for (node, held) in &last.replicas {
            if let Some(version) = held {
                let what = format!("{node} holds");
                self.origin(version, None, &what);
            }
        }
        let newest = last.replicas.iter().map(|(_, held)| held.as_ref()).max();
        if let Some(newest) = newest
            && let Some((behind, _)) = last
                .replicas
                .iter()
                .find(|(_, held)| held.as_ref() != newest)
        {
            let cells: Vec<String> = last
                .replicas
                .iter()
                .map(|(node, held)| format!("{node}: {}", show(held.as_ref())))
                .collect();
            let what = format!("replicas differ after repair: {}", cells.join(", "));
            let mut writes: Vec<usize> = last
                .replicas
                .iter()
                .filter_map(|(_, held)| self.writes.get(held.as_ref()?.value.as_slice()))
                .copied()
                .collect();
            writes.sort_unstable();
            writes.dedup();
            self.violation(ViolationKind::Divergent, what, &writes, Some(*behind));
        }
    }
}
