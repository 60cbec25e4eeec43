//! The runs of one keyspace, and reading through them: the newest cell of
//! a key across sled and the runs, and a range of sled merged with the
//! runs' cells.

use std::cmp::Ordering;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::engine::KvIter;
use crate::error::Result;
use crate::live_size::KeyspaceCounts;
use crate::runs::file::{Run, RunRange};
use ringstore_cell::Cell;

/// The runs of one keyspace, shared by its readers, its writers and the
/// folder. Readers take a [`Runs`] snapshot: a run removed after that
/// stays readable through it (its file stays open).
#[derive(Default)]
pub(crate) struct RunSet {
    any: AtomicBool,
    runs: Mutex<Arc<Runs>>,
}

/// The runs of a keyspace at one moment, sorted by first key.
#[derive(Default)]
pub(crate) struct Runs {
    sorted: Vec<Arc<Run>>,
    /// `reach[i]`: the highest last key among `sorted[..=i]`, so a lookup
    /// walking down from the runs starting at or below a key stops at the
    /// first run whose reach is below it.
    reach: Vec<Vec<u8>>,
}

impl RunSet {
    /// The runs now, or `None` when there are none (the common case,
    /// answered without a lock).
    pub(crate) fn snapshot(&self) -> Option<Arc<Runs>> {
        if !self.any.load(AtomicOrdering::Acquire) {
            return None;
        }
        let runs = Arc::clone(&self.lock());
        (!runs.sorted.is_empty()).then_some(runs)
    }

    /// Every run, in first-key order.
    pub(crate) fn all(&self) -> Vec<Arc<Run>> {
        self.lock().sorted.clone()
    }

    /// Whether the run at `path` is still held (not folded or dropped).
    pub(crate) fn contains(&self, path: &Path) -> bool {
        self.lock().sorted.iter().any(|r| r.path() == path)
    }

    /// Adds a finished run.
    pub(crate) fn add(&self, run: Arc<Run>) {
        let mut runs = self.lock();
        let mut sorted = runs.sorted.clone();
        let at = sorted.partition_point(|r| r.first_key() <= run.first_key());
        sorted.insert(at, run);
        *runs = Arc::new(Runs::new(sorted));
        self.any.store(true, AtomicOrdering::Release);
    }

    /// Removes the run at `path`, if held.
    pub(crate) fn remove(&self, path: &Path) {
        let mut runs = self.lock();
        let sorted: Vec<Arc<Run>> = runs
            .sorted
            .iter()
            .filter(|r| r.path() != path)
            .cloned()
            .collect();
        self.any.store(!sorted.is_empty(), AtomicOrdering::Release);
        *runs = Arc::new(Runs::new(sorted));
    }

    /// What the runs hold, summed.
    pub(crate) fn counts(&self) -> KeyspaceCounts {
        let runs = self.lock();
        runs.sorted
            .iter()
            .fold(KeyspaceCounts::default(), |sum, run| {
                let c = run.counts();
                KeyspaceCounts {
                    bytes: sum.bytes + c.bytes,
                    keys: sum.keys + c.keys,
                    tombstones: sum.tombstones + c.tombstones,
                }
            })
    }

    /// The size of the runs' files.
    pub(crate) fn file_bytes(&self) -> u64 {
        self.lock().sorted.iter().map(|r| r.file_bytes()).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Arc<Runs>> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Runs {
    fn new(sorted: Vec<Arc<Run>>) -> Runs {
        let mut reach: Vec<Vec<u8>> = Vec::with_capacity(sorted.len());
        for run in &sorted {
            let last = run.last_key();
            let next = match reach.last() {
                Some(previous) if previous.as_slice() >= last => previous.clone(),
                _ => last.to_vec(),
            };
            reach.push(next);
        }
        Runs { sorted, reach }
    }

    /// The newest encoded cell of `data_key` among the runs.
    pub(crate) fn get(&self, data_key: &[u8]) -> Result<Option<Vec<u8>>> {
        let below = self.sorted.partition_point(|r| r.first_key() <= data_key);
        let mut newest = None;
        for i in (0..below).rev() {
            if self.reach[i].as_slice() < data_key {
                break;
            }
            if let Some(cell) = self.sorted[i].get(data_key)? {
                newest = Some(newer_owned(newest, cell));
            }
        }
        Ok(newest)
    }

    /// The runs whose keys may lie within the bounds, in first-key order.
    fn overlapping(&self, from: &Bound<Vec<u8>>, to: &Bound<Vec<u8>>) -> Vec<Arc<Run>> {
        let low: &[u8] = match from {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        self.sorted
            .iter()
            .filter(|run| {
                let ends_above = run.last_key() >= low;
                let starts_below = match to {
                    Bound::Included(k) => run.first_key() <= k.as_slice(),
                    Bound::Excluded(k) => run.first_key() < k.as_slice(),
                    Bound::Unbounded => true,
                };
                ends_above && starts_below
            })
            .cloned()
            .collect()
    }
}

/// The newer of two stored cells by last-write-wins: `kept` unless `other`
/// decodes and is greater. A cell that does not decode is never preferred,
/// except `kept`, which is returned so its reader reports it.
pub(crate) fn newer<'a>(kept: Option<&'a [u8]>, other: Option<&'a [u8]>) -> Option<&'a [u8]> {
    match (kept, other) {
        (None, other) => other,
        (kept, None) => kept,
        (Some(kept), Some(other)) => match (Cell::decode(kept), Cell::decode(other)) {
            (Ok(a), Ok(b)) if b.compare(&a) == Ordering::Greater => Some(other),
            _ => Some(kept),
        },
    }
}

/// [`newer`] of owned cells.
pub(crate) fn newer_owned(kept: Option<Vec<u8>>, other: Vec<u8>) -> Vec<u8> {
    match kept {
        Some(kept) if newer(Some(&kept), Some(&other)) == Some(kept.as_slice()) => kept,
        _ => other,
    }
}

/// One source of a merged range: its next entry, read ahead.
struct Source {
    entries: KvIter,
    head: Option<(Vec<u8>, Vec<u8>)>,
}

impl Source {
    /// Reads the next entry into `head`; an error is returned and ends the
    /// source.
    fn advance(&mut self) -> Result<()> {
        self.head = None;
        match self.entries.next() {
            Some(Ok(entry)) => self.head = Some(entry),
            Some(Err(error)) => {
                self.entries = Box::new(std::iter::empty());
                return Err(error);
            }
            None => {}
        }
        Ok(())
    }
}

/// Sled's entries in a range merged with the runs' cells in the same range,
/// in data key order, each key once with its newest cell. Runs are opened
/// only when the merge reaches their first key, so a scan over many
/// disjoint runs reads one at a time.
pub(crate) struct Merged {
    /// Sled's entries first: on a tie it is the one kept.
    sources: Vec<Source>,
    waiting: std::vec::IntoIter<Arc<Run>>,
    next_waiting: Option<Arc<Run>>,
    from: Bound<Vec<u8>>,
    to: Bound<Vec<u8>>,
    started: bool,
}

impl Merged {
    pub(crate) fn new(
        tree: KvIter,
        runs: &Runs,
        from: Bound<Vec<u8>>,
        to: Bound<Vec<u8>>,
    ) -> Merged {
        let mut waiting = runs.overlapping(&from, &to).into_iter();
        let next_waiting = waiting.next();
        Merged {
            sources: vec![Source {
                entries: tree,
                head: None,
            }],
            waiting,
            next_waiting,
            from,
            to,
            started: false,
        }
    }

    fn smallest_head(&self) -> Option<&[u8]> {
        self.sources
            .iter()
            .filter_map(|s| s.head.as_ref().map(|(k, _)| k.as_slice()))
            .min()
    }

    /// Opens every waiting run that starts at or below the smallest head
    /// (or the next one, when no source has a head).
    fn open_runs(&mut self) -> Result<()> {
        while let Some(run) = self.next_waiting.take() {
            let due = match self.smallest_head() {
                Some(head) => run.first_key() <= head,
                None => true,
            };
            if !due {
                self.next_waiting = Some(run);
                break;
            }
            self.next_waiting = self.waiting.next();
            let range: RunRange = run.range(self.from.clone(), self.to.clone());
            let mut source = Source {
                entries: Box::new(range),
                head: None,
            };
            source.advance()?;
            self.sources.push(source);
        }
        Ok(())
    }

    fn step(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if !self.started {
            self.started = true;
            self.sources[0].advance()?;
        }
        self.open_runs()?;
        let Some(key) = self.smallest_head().map(<[u8]>::to_vec) else {
            return Ok(None);
        };
        let mut chosen: Option<Vec<u8>> = None;
        for source in &mut self.sources {
            if source.head.as_ref().is_some_and(|(k, _)| *k == key) {
                let (_, cell) = source.head.take().expect("checked");
                chosen = Some(match chosen {
                    None => cell,
                    Some(kept) => newer_owned(Some(kept), cell),
                });
                source.advance()?;
            }
        }
        // Runs read to their end are dropped; sled's source stays first.
        let mut i = 1;
        while i < self.sources.len() {
            if self.sources[i].head.is_none() {
                self.sources.swap_remove(i);
            } else {
                i += 1;
            }
        }
        Ok(chosen.map(|cell| (key, cell)))
    }
}

impl Iterator for Merged {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step().transpose()
    }
}
