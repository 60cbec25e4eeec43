//! The checks of write order against real time, judged when a run asks
//! for them ([`Checks::write_order`](crate::Checks::write_order)):
//! reordered writes, and late writes.

use crate::key::KeyCheck;
use crate::violation::ViolationKind;

impl KeyCheck<'_> {
    /// Acknowledged writes further apart than the clock bound that
    /// last-write-wins put in the wrong order: the later one has the lower
    /// (or the same) timestamp.
    pub fn real_time_order(&mut self) {
        if !self.checks.write_order {
            return;
        }
        let bound = self.bound();
        let judged: Vec<usize> = (0..self.writes.len())
            .filter(|&w| self.writes[w].write.acked().is_some() && !self.writes[w].exempt)
            .collect();
        for &earlier in &judged {
            let first = &self.writes[earlier];
            let overtaken = judged.iter().copied().find(|&later| {
                let second = &self.writes[later];
                second.op.invoked > first.op.completed + bound
                    && second.timestamp <= first.timestamp
            });
            if let Some(later) = overtaken {
                let what = format!(
                    "{} was written more than the clock bound ({bound:?}) after {} was \
                     acknowledged, yet has the lower timestamp: last-write-wins put it behind",
                    self.writes[later].describe(),
                    first.describe(),
                );
                let ops = [first.op_index, self.writes[later].op_index];
                self.violation(ViolationKind::Reordered, what, &ops, None);
            }
        }
    }

    /// Writes a client was told failed that came back (read, or held at
    /// the end) above a write the same client sent more than the clock
    /// bound after the failure and saw acknowledged: the late write
    /// overwrote the acknowledged one.
    pub fn late_writes(&mut self) {
        if !self.checks.write_order {
            return;
        }
        let bound = self.bound();
        // Failed writes seen: their timestamp is known only so.
        let seen: Vec<usize> = (0..self.writes.len())
            .filter(|&w| {
                let write = &self.writes[w];
                write.write.acked().is_none() && write.timestamp.is_some() && !write.exempt
            })
            .collect();
        for late in seen {
            let failed = &self.writes[late];
            let overwritten = (0..self.writes.len()).find(|&w| {
                let later = &self.writes[w];
                later.write.acked().is_some()
                    && later.op.client == failed.op.client
                    && later.op.invoked > failed.op.completed + bound
                    && later.older_than(failed, bound)
            });
            if let Some(later) = overwritten {
                let what = format!(
                    "{}, written by a request its client was told failed, overwrote {}, which \
                     the same client wrote more than the clock bound ({bound:?}) after the \
                     failure and saw acknowledged",
                    failed.describe(),
                    self.writes[later].describe()
                );
                let ops = [failed.op_index, self.writes[later].op_index];
                self.violation(ViolationKind::LateWrite, what, &ops, None);
            }
        }
    }
}
