//! The checks of each read against what was acknowledged, and read,
//! before it began: stale, resurrected, expired and non-monotonic reads
//! (see the crate's essay for why each is sound).

use crate::history::{Op, Version};
use crate::key::KeyCheck;
use crate::violation::{ViolationKind, show};

/// What an earlier read tells a later one.
enum Answer {
    /// It returned the value of this write (an index into `writes`).
    Value(usize),
    /// It found nothing, though writes it must not have been older than
    /// bound it: one of these writes hid the key (indices into `writes`).
    Hidden(Vec<usize>),
    /// It found nothing, and nothing bound it: the key may have had no cell.
    Unbound,
}

impl KeyCheck<'_> {
    /// Judges every read that answered, in invoke order.
    pub fn reads(&mut self) {
        let reads: Vec<usize> = self
            .ops
            .iter()
            .copied()
            .filter(|&i| self.history[i].read_result().is_some())
            .collect();
        // What each read judged so far told, for the reads after it.
        let mut answers: Vec<(usize, Answer)> = Vec::with_capacity(reads.len());
        for read in reads {
            let op = &self.history[read];
            let result = op.read_result().flatten().cloned();
            let found = match &result {
                Some(version) => match self.origin(version, Some(read), "a read returned") {
                    Some(w) => Some(w),
                    None => continue,
                },
                None => None,
            };
            if let Some(w) = found
                && self.writes[w].write.acked().is_none()
            {
                self.report.reads_of_failed_writes += 1;
            }
            if result.is_none() {
                self.report.reads_not_found += 1;
            }
            if let Some(w) = found
                && self.expired(read, w)
            {
                continue;
            }
            let floors = self.acked_before(op);
            let answer = match found {
                Some(w) => Answer::Value(w),
                None if floors.is_empty() && !self.bound_by_reads(op, &answers) => Answer::Unbound,
                None => Answer::Hidden(self.hidden(read, &floors, &answers)),
            };
            // A stale read is reported once, as stale.
            if !self.stale(read, found, &floors) && self.checks.monotonic_reads {
                self.monotonic(read, found, &answers);
            }
            answers.push((read, answer));
        }
    }

    /// The acknowledged writes of the key a read `op` must not be older
    /// than: acknowledged before it began, at a level overlapping its own
    /// (indices into `writes`).
    fn acked_before(&self, op: &Op) -> Vec<usize> {
        (0..self.writes.len())
            .filter(|&w| {
                let write = &self.writes[w];
                write.write.acked().is_some()
                    && write.op.completed < op.invoked
                    && self.overlap(write.op.level, op.level)
            })
            .collect()
    }

    /// The earlier reads that bind `op`: done before it began, at levels
    /// overlapping, and not while a range moved (see the essay).
    fn binding<'r>(&self, op: &Op, answers: &'r [(usize, Answer)]) -> Vec<&'r (usize, Answer)> {
        if !self.checks.monotonic_reads {
            return Vec::new();
        }
        answers
            .iter()
            .filter(|(r, _)| {
                let other = &self.history[*r];
                other.completed < op.invoked
                    && self.overlap(other.level, op.level)
                    && !self
                        .checks
                        .range_movements
                        .iter()
                        .any(|w| w.overlaps(other.invoked, other.completed))
            })
            .collect()
    }

    /// Whether an earlier read that returned a value binds `op`.
    fn bound_by_reads(&self, op: &Op, answers: &[(usize, Answer)]) -> bool {
        self.binding(op, answers)
            .iter()
            .any(|(_, a)| matches!(a, Answer::Value(_)))
    }

    /// The writes that may have hidden the key from the read `read` that
    /// found nothing, consistent with what it must not be older than.
    fn hidden(&self, read: usize, floors: &[usize], answers: &[(usize, Answer)]) -> Vec<usize> {
        let op = &self.history[read];
        let mut bounds: Vec<usize> = floors.to_vec();
        bounds.extend(
            self.binding(op, answers)
                .iter()
                .filter_map(|(_, a)| match a {
                    Answer::Value(w) => Some(*w),
                    _ => None,
                }),
        );
        let bound = self.bound();
        self.hiding(op.completed, self.exempt(op))
            .into_iter()
            .filter(|&h| {
                bounds
                    .iter()
                    .all(|&f| !self.writes[h].older_than(&self.writes[f], bound))
            })
            .collect()
    }

    /// A value read after it had surely expired; whether it was one.
    fn expired(&mut self, read: usize, w: usize) -> bool {
        let op = &self.history[read];
        let write = &self.writes[w];
        if !write.surely_expired(op.invoked, self.bound(), self.exempt(op)) {
            return false;
        }
        let what = format!(
            "a read returned {}, whose TTL had run out: it began more than the TTL plus the \
             clock bound ({:?}) after its write was accepted (by {:.3}s at the latest)",
            write.describe(),
            self.bound(),
            write.stamped_by.unwrap_or_default().as_secs_f64()
        );
        let ops = [read, write.op_index];
        self.violation(ViolationKind::Expired, what, &ops, None);
        true
    }

    /// Stale and resurrected reads: older than a write acknowledged before
    /// the read began. Whether the read was one.
    fn stale(&mut self, read: usize, found: Option<usize>, floors: &[usize]) -> bool {
        let op = &self.history[read];
        let bound = self.bound();
        let hiding = match found {
            Some(_) => Vec::new(),
            None => self.hiding(op.completed, self.exempt(op)),
        };
        let broken: Vec<usize> = floors
            .iter()
            .copied()
            .filter(|&f| match found {
                Some(w) => self.writes[w].older_than(&self.writes[f], bound),
                None => hiding
                    .iter()
                    .all(|&h| self.writes[h].older_than(&self.writes[f], bound)),
            })
            .collect();
        let Some(floor) = self.newest(&broken) else {
            return false;
        };
        let returned = self.returned(read);
        let floor_write = &self.writes[floor];
        let (kind, what) = if floor_write.write.is_delete() {
            let what = format!(
                "a read returned {returned}, which {} had deleted, acknowledged before the read \
                 began",
                floor_write.describe()
            );
            (ViolationKind::Resurrected, what)
        } else {
            let what = format!(
                "a read returned {returned} after {} was acknowledged",
                floor_write.describe()
            );
            (ViolationKind::Stale, what)
        };
        let ops = [read, floor_write.op_index];
        self.violation(kind, what, &ops, None);
        true
    }

    /// Non-monotonic reads: older than what an earlier read returned, or
    /// than every write that can have hidden the key from an earlier read
    /// that found nothing.
    fn monotonic(&mut self, read: usize, found: Option<usize>, answers: &[(usize, Answer)]) {
        let op = &self.history[read];
        let bound = self.bound();
        let hiding = match found {
            Some(_) => Vec::new(),
            None => self.hiding(op.completed, self.exempt(op)),
        };
        let mut broken: Option<(usize, String)> = None;
        for (other, answer) in self.binding(op, answers) {
            let why = match (answer, found) {
                (Answer::Value(x), Some(w))
                    if self.writes[w].older_than(&self.writes[*x], bound) =>
                {
                    format!("another read had returned {}", self.writes[*x].describe())
                }
                (Answer::Value(x), None)
                    if hiding
                        .iter()
                        .all(|&h| self.writes[h].older_than(&self.writes[*x], bound)) =>
                {
                    format!(
                        "another read had returned {}, and nothing that could hide it was written",
                        self.writes[*x].describe()
                    )
                }
                (Answer::Hidden(hidden), Some(w))
                    if !hidden.is_empty()
                        && hidden
                            .iter()
                            .all(|&h| self.writes[w].older_than(&self.writes[h], bound)) =>
                {
                    let newer: Vec<String> =
                        hidden.iter().map(|&h| self.writes[h].describe()).collect();
                    format!(
                        "another read had found nothing, which only writes newer than it can \
                         explain ({})",
                        newer.join(", ")
                    )
                }
                _ => continue,
            };
            broken = Some((*other, why));
            break;
        }
        if let Some((other, why)) = broken {
            let what = format!("a read returned {} after {why}", self.returned(read));
            self.violation(ViolationKind::NonMonotonic, what, &[read, other], None);
        }
    }

    /// What the read `read` returned, for a report.
    fn returned(&self, read: usize) -> String {
        let version: Option<&Version> = self.history[read].read_result().flatten();
        show(version)
    }

    /// Of `candidates` (indices into `writes`), the one with the highest
    /// known timestamp (then the last acknowledged), for a report.
    pub(crate) fn newest(&self, candidates: &[usize]) -> Option<usize> {
        candidates
            .iter()
            .copied()
            .max_by_key(|&w| (self.writes[w].timestamp, self.writes[w].op.completed))
    }
}
