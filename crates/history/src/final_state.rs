//! The checks of a key's final state, read after healing: lost writes,
//! deleted or expired values that came back, phantoms held by a replica,
//! and replicas that still differ.
//!
//! Garbage collection may have purged a tombstone or an expired value by
//! the time of the final reads, so a key that was deleted may hold a
//! tombstone on one replica and nothing on another: both read as nothing,
//! and neither is divergence. A purged cell hides nothing older, though:
//! every replica holds nothing or that cell, or the older value would come
//! back (which `Lost`, `Resurrected` or `Divergent` reports).

use std::cmp::Ordering;

use crate::history::{FinalKey, HeldCell, Level, ReadOutcome, Version};
use crate::key::KeyCheck;
use crate::violation::{ViolationKind, show};

impl KeyCheck<'_> {
    /// Lost writes, values that came back, phantoms in the final state,
    /// divergent replicas.
    pub fn final_state(&mut self, last: Option<&FinalKey>) {
        let rf = self.checks.replication_factor;
        let quorum = Level::Quorum.replicas(rf);
        let durable: Vec<usize> = (0..self.writes.len())
            .filter(|&w| {
                let write = &self.writes[w];
                write.write.acked().is_some() && write.op.level.replicas(rf) >= quorum
            })
            .collect();
        let Some(last) = last else {
            if !durable.is_empty() {
                let what = "no final state was recorded for a key with acknowledged writes";
                self.violation(ViolationKind::Unreadable, what.to_string(), &[], None);
            }
            return;
        };
        match &last.read_all {
            ReadOutcome::Found(version) => self.final_value(last, version, &durable),
            ReadOutcome::NotFound => self.final_nothing(last, &durable),
            ReadOutcome::Failed(failure) => {
                let what = format!("the final read at ALL failed: {failure}");
                self.violation(ViolationKind::Unreadable, what, &[], None);
                return;
            }
        }
        self.held(last);
        self.divergent(last);
    }

    /// The final read returned `version`: it must not have expired, nor be
    /// older than a durable write.
    fn final_value(&mut self, last: &FinalKey, version: &Version, durable: &[usize]) {
        let Some(w) = self.origin(version, None, "the final read at ALL returned") else {
            return;
        };
        let bound = self.bound();
        let write = &self.writes[w];
        if write.surely_expired(last.read_at, bound, false) {
            let what = format!(
                "the final read at ALL returned {}, whose TTL had run out: it began more than \
                 the TTL plus the clock bound ({bound:?}) after its write was accepted",
                write.describe()
            );
            let ops = [write.op_index];
            self.violation(ViolationKind::Expired, what, &ops, None);
        }
        for &d in durable {
            if !self.writes[w].older_than(&self.writes[d], bound) {
                continue;
            }
            let newer = &self.writes[d];
            let (kind, what) = if newer.write.is_delete() {
                let what = format!(
                    "the final read at ALL returned {version}, which {} had deleted, \
                     acknowledged at a quorum",
                    newer.describe()
                );
                (ViolationKind::Resurrected, what)
            } else {
                let what = format!(
                    "the final read at ALL returned {version}, older than the acknowledged {}",
                    newer.describe()
                );
                (ViolationKind::Lost, what)
            };
            let behind = self.replica_without(last, d);
            let ops = [newer.op_index];
            self.violation(kind, what, &ops, behind);
        }
    }

    /// The final read found nothing: every durable write must be hidden by
    /// a delete or an expired value no older than it.
    fn final_nothing(&mut self, last: &FinalKey, durable: &[usize]) {
        let bound = self.bound();
        let hiding = self.hiding(last.read_at, false);
        for &d in durable {
            let hidden = hiding
                .iter()
                .any(|&h| !self.writes[h].older_than(&self.writes[d], bound));
            if hidden {
                continue;
            }
            let what = format!(
                "the final read at ALL found nothing, yet {} was acknowledged and nothing that \
                 could hide it (a delete, a value whose TTL ran out) is as new",
                self.writes[d].describe()
            );
            let behind = self.replica_without(last, d);
            let ops = [self.writes[d].op_index];
            self.violation(ViolationKind::Lost, what, &ops, behind);
        }
    }

    /// A replica that does not hold write `w`, for a report.
    fn replica_without(&self, last: &FinalKey, w: usize) -> Option<crate::NodeId> {
        let value = self.writes[w].write.value();
        last.replicas
            .iter()
            .find(|(_, held)| held.as_ref().map(|c| c.value.as_deref()) != Some(value))
            .map(|(node, _)| *node)
    }

    /// Every held cell must come from a write of the key, as written: a
    /// value with its write's timestamp and TTL (or none), a tombstone from
    /// a delete.
    fn held(&mut self, last: &FinalKey) {
        for (node, held) in &last.replicas {
            let Some(cell) = held else { continue };
            let Some(value) = &cell.value else {
                if !self.explains_tombstone(cell.timestamp) {
                    let what = format!(
                        "{node} holds a tombstone at {}, which no delete of this key was \
                         stamped with",
                        cell.timestamp.0
                    );
                    self.violation(ViolationKind::Phantom, what, &[], Some(*node));
                }
                continue;
            };
            let version = Version {
                timestamp: cell.timestamp,
                value: value.clone(),
            };
            let where_ = format!("{node} holds");
            let Some(w) = self.origin(&version, None, &where_) else {
                continue;
            };
            let write = &self.writes[w];
            if write.write.ttl().is_some() != cell.expires_at.is_some() {
                let what = format!(
                    "{node} holds {cell}, but its write was {}",
                    match write.write.ttl() {
                        Some(ttl) => format!("made with a TTL of {ttl:?}"),
                        None => "made without a TTL".to_string(),
                    }
                );
                let ops = [write.op_index];
                self.violation(ViolationKind::Phantom, what, &ops, Some(*node));
            }
        }
    }

    /// After repair every replica holds the newest cell, or nothing where
    /// garbage collection may have purged it (a tombstone, an expired
    /// value).
    fn divergent(&mut self, last: &FinalKey) {
        let newest = last
            .replicas
            .iter()
            .filter_map(|(_, held)| held.as_ref())
            .max_by(|a, b| a.compare(b));
        let Some(newest) = newest else { return };
        let purgeable = self.purgeable(newest, last);
        let behind = last.replicas.iter().find(|(_, held)| match held {
            Some(cell) => cell.compare(newest) != Ordering::Equal,
            None => !purgeable,
        });
        let Some((behind, _)) = behind else { return };
        let cells: Vec<String> = last
            .replicas
            .iter()
            .map(|(node, held)| format!("{node}: {}", show_cell(held.as_ref())))
            .collect();
        let what = format!("replicas differ after repair: {}", cells.join(", "));
        let mut ops: Vec<usize> = last
            .replicas
            .iter()
            .filter_map(|(_, held)| {
                let value = held.as_ref()?.value.as_deref()?;
                let w = *self.values.get(value)?;
                Some(self.writes[w].op_index)
            })
            .collect();
        ops.sort_unstable();
        ops.dedup();
        self.violation(ViolationKind::Divergent, what, &ops, Some(*behind));
    }

    /// Whether garbage collection may have purged `cell` by the final
    /// reads: a tombstone, or a value whose TTL may have run out.
    fn purgeable(&self, cell: &HeldCell, last: &FinalKey) -> bool {
        let Some(value) = &cell.value else {
            return true;
        };
        match self.values.get(value.as_slice()) {
            Some(&w) => self.writes[w].may_have_expired(last.read_at, self.bound(), false),
            None => cell.expires_at.is_some(),
        }
    }
}

/// `"v"@17`, `tombstone@17`, or `nothing`.
fn show_cell(cell: Option<&HeldCell>) -> String {
    cell.map_or_else(|| show(None), ToString::to_string)
}
