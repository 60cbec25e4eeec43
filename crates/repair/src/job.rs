//! One repair command's state: its ranges, which are done, what it moved,
//! and the checkpoint that lets it continue after a restart.
//!
//! A job is a list of (keyspace, range) units repaired one after another.
//! After each unit the shell persists [`RepairJob::encode`]; a node that
//! restarts with an unfinished job resumes it, skipping the units already
//! done, so at most the unit in flight is repaired twice (harmless: a
//! repair only ever writes winning cells).

use ringstore_cell::{KeyspaceId, Timestamp};
use ringstore_placement::{Token, TokenRange};
use uuid::Uuid;

/// The encoding's format version.
const FORMAT: u8 = 1;

/// How a repair runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RepairOptions {
    /// Compare only: report what differs, move nothing, record nothing.
    pub dry_run: bool,
    /// Only the replicas in the coordinator's data center take part.
    pub dc_local: bool,
}

/// What became of one unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitState {
    /// Not yet repaired.
    Pending,
    /// Repaired (or, in a dry run, compared).
    Done(UnitReport),
    /// The repair failed; the reason, for people.
    Failed(String),
}

/// What repairing one unit found and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitReport {
    /// Keys that were not the same on every replica.
    pub mismatched_keys: u64,
    /// Rows written to replicas that lacked them (0 in a dry run).
    pub rows_sent: u64,
    /// Bytes exchanged with other nodes (tree hashes, row lists, cells).
    pub bytes: u64,
}

/// One unit of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairUnit {
    /// The keyspace.
    pub keyspace: KeyspaceId,
    /// The range.
    pub range: TokenRange,
    /// What became of it.
    pub state: UnitState,
}

/// A repair command's progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairJob {
    /// Its id.
    pub id: Uuid,
    /// When it began (what a success records in the repair history).
    pub began: Timestamp,
    /// How it runs.
    pub options: RepairOptions,
    /// Its units, in the order they are repaired.
    pub units: Vec<RepairUnit>,
}

/// Totals over a job's units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTotals {
    /// Units in the job.
    pub units: usize,
    /// Units done.
    pub done: usize,
    /// Units that failed.
    pub failed: usize,
    /// The sums of the done units' reports.
    pub report: UnitReport,
}

impl RepairJob {
    /// A job over `units` (keyspace, range), none done yet.
    pub fn new(
        id: Uuid,
        began: Timestamp,
        options: RepairOptions,
        units: impl IntoIterator<Item = (KeyspaceId, TokenRange)>,
    ) -> RepairJob {
        RepairJob {
            id,
            began,
            options,
            units: units
                .into_iter()
                .map(|(keyspace, range)| RepairUnit {
                    keyspace,
                    range,
                    state: UnitState::Pending,
                })
                .collect(),
        }
    }

    /// The first unit still pending.
    pub fn next_pending(&self) -> Option<usize> {
        self.units
            .iter()
            .position(|unit| unit.state == UnitState::Pending)
    }

    /// Whether no unit is pending.
    pub fn is_finished(&self) -> bool {
        self.next_pending().is_none()
    }

    /// Records what became of unit `index`.
    pub fn finish_unit(&mut self, index: usize, state: UnitState) {
        if let Some(unit) = self.units.get_mut(index) {
            unit.state = state;
        }
    }

    /// Makes every failed unit pending again (a second pass, once the
    /// replicas that failed them are back). How many.
    pub fn retry_failed(&mut self) -> usize {
        let mut count = 0;
        for unit in &mut self.units {
            if matches!(unit.state, UnitState::Failed(_)) {
                unit.state = UnitState::Pending;
                count += 1;
            }
        }
        count
    }

    /// Totals over the units.
    pub fn totals(&self) -> JobTotals {
        let mut totals = JobTotals {
            units: self.units.len(),
            ..JobTotals::default()
        };
        for unit in &self.units {
            match &unit.state {
                UnitState::Pending => {}
                UnitState::Failed(_) => totals.failed += 1,
                UnitState::Done(report) => {
                    totals.done += 1;
                    totals.report.mismatched_keys += report.mismatched_keys;
                    totals.report.rows_sent += report.rows_sent;
                    totals.report.bytes += report.bytes;
                }
            }
        }
        totals
    }

    /// The failed units with their reasons.
    pub fn failures(&self) -> impl Iterator<Item = (&RepairUnit, &str)> {
        self.units.iter().filter_map(|unit| match &unit.state {
            UnitState::Failed(reason) => Some((unit, reason.as_str())),
            _ => None,
        })
    }

    /// The bytes to persist as the job's checkpoint.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![FORMAT];
        bytes.extend_from_slice(self.id.as_bytes());
        bytes.extend_from_slice(&self.began.0.to_be_bytes());
        bytes.push(u8::from(self.options.dry_run) | u8::from(self.options.dc_local) << 1);
        for unit in &self.units {
            bytes.extend_from_slice(unit.keyspace.0.as_bytes());
            bytes.extend_from_slice(&unit.range.start.0.to_be_bytes());
            bytes.extend_from_slice(&unit.range.end.0.to_be_bytes());
            match &unit.state {
                UnitState::Pending => bytes.push(0),
                UnitState::Done(report) => {
                    bytes.push(1);
                    for n in [report.mismatched_keys, report.rows_sent, report.bytes] {
                        bytes.extend_from_slice(&n.to_be_bytes());
                    }
                }
                UnitState::Failed(reason) => {
                    bytes.push(2);
                    let reason = &reason.as_bytes()[..reason.len().min(u16::MAX as usize)];
                    bytes.extend_from_slice(&(reason.len() as u16).to_be_bytes());
                    bytes.extend_from_slice(reason);
                }
            }
        }
        bytes
    }

    /// Decodes [`RepairJob::encode`]'s bytes; `None` if they are not a job
    /// of a known format.
    pub fn decode(bytes: &[u8]) -> Option<RepairJob> {
        let mut reader = Reader(bytes);
        if reader.u8()? != FORMAT {
            return None;
        }
        let id = Uuid::from_bytes(reader.array()?);
        let began = Timestamp(reader.i64()?);
        let flags = reader.u8()?;
        let options = RepairOptions {
            dry_run: flags & 1 != 0,
            dc_local: flags & 2 != 0,
        };
        let mut units = Vec::new();
        while !reader.0.is_empty() {
            let keyspace = KeyspaceId(Uuid::from_bytes(reader.array()?));
            let range = TokenRange::new(Token(reader.i64()?), Token(reader.i64()?));
            let state = match reader.u8()? {
                0 => UnitState::Pending,
                1 => UnitState::Done(UnitReport {
                    mismatched_keys: reader.u64()?,
                    rows_sent: reader.u64()?,
                    bytes: reader.u64()?,
                }),
                2 => {
                    let len = u16::from_be_bytes(reader.array()?) as usize;
                    UnitState::Failed(String::from_utf8_lossy(reader.take(len)?).into_owned())
                }
                _ => return None,
            };
            units.push(RepairUnit {
                keyspace,
                range,
                state,
            });
        }
        Some(RepairJob {
            id,
            began,
            options,
            units,
        })
    }
}

/// Reads fixed-size fields off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.array::<1>()?[0])
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.array()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> RepairJob {
        let ks = KeyspaceId(Uuid::from_bytes([3; 16]));
        RepairJob::new(
            Uuid::from_bytes([9; 16]),
            Timestamp(77),
            RepairOptions {
                dry_run: false,
                dc_local: true,
            },
            (0..4).map(|i| (ks, TokenRange::new(Token(i * 10), Token(i * 10 + 10)))),
        )
    }

    #[test]
    fn units_are_done_in_order_and_totals_add_up() {
        let mut job = job();
        assert_eq!(job.next_pending(), Some(0));
        let report = UnitReport {
            mismatched_keys: 3,
            rows_sent: 4,
            bytes: 500,
        };
        job.finish_unit(0, UnitState::Done(report));
        job.finish_unit(1, UnitState::Failed("replica down".into()));
        assert_eq!(job.next_pending(), Some(2));
        job.finish_unit(2, UnitState::Done(report));
        job.finish_unit(3, UnitState::Done(UnitReport::default()));
        assert!(job.is_finished());
        let totals = job.totals();
        assert_eq!((totals.units, totals.done, totals.failed), (4, 3, 1));
        assert_eq!(totals.report.bytes, 1000);
        assert_eq!(job.failures().count(), 1);
        // A second pass makes the failed unit, and only it, pending again.
        assert_eq!(job.retry_failed(), 1);
        assert_eq!(job.next_pending(), Some(1));
        assert_eq!(job.totals().done, 3);
        assert_eq!(job.retry_failed(), 0);
    }

    #[test]
    fn the_checkpoint_round_trips_and_garbage_is_refused() {
        let mut job = job();
        job.finish_unit(
            1,
            UnitState::Done(UnitReport {
                mismatched_keys: 1,
                rows_sent: 2,
                bytes: 3,
            }),
        );
        job.finish_unit(2, UnitState::Failed("boom ☠".into()));
        let bytes = job.encode();
        assert_eq!(RepairJob::decode(&bytes), Some(job));
        for cut in 1..bytes.len() {
            // A truncated checkpoint never decodes into a longer job.
            if let Some(decoded) = RepairJob::decode(&bytes[..cut]) {
                assert!(decoded.units.len() < 4);
            }
        }
        assert_eq!(RepairJob::decode(&[2]), None);
        assert_eq!(RepairJob::decode(&[]), None);
    }
}
