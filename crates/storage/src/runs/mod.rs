//! Runs: cells received in bulk (a range streamed by bootstrap, decommission,
//! removenode, replace or a keyspace alter), kept as sorted files beside sled until a
//! background fold merges them into sled.
//!
//! # Why
//! sled stores each key by itself: an insert copies its leaf, logs a
//! fragment, and rewrites the leaf at splits and consolidations, so a bulk
//! load of 1 KiB values writes about four bytes per byte and costs about
//! 15 µs of CPU per cell (`benches/bootstrap.sh`). Even one sled value per
//! 256 KiB chunk was written 3.7 times. A run file is written once, in
//! order, at the speed the stream arrives, and the node can serve the range
//! as soon as the run is synced. The fold pays sled's cost later, off the
//! join's critical path, as Cassandra's compaction follows its streaming.
//!
//! # How the store reads through runs
//! - A keyspace's runs are a [`RunSet`]; readers take a snapshot, so a run
//!   the fold removes stays readable by whoever holds it (its file stays
//!   open after it is unlinked).
//! - A point read takes the newest cell of sled's and the runs'
//!   ([`newer`], last-write-wins); a scan merges sled's range with the runs'
//!   ([`Merged`]), each key once with its newest cell.
//! - A write merges with the newest of sled's cell and the runs' cell of
//!   its key, and stores its winner in sled: sled then holds a cell at
//!   least as new as any run's for that key.
//! - Purges (cleanup, garbage collection) first fold the keyspace's runs,
//!   so removing a key from sled cannot uncover an older cell in a run.
//!
//! # The fold
//! One thread per store folds the oldest run while no run is being
//! written and no bulk load holds it off (a stream operation does for its
//! whole length, so the fold does not take CPU from the streams between
//! two runs), or once 64 runs wait, so a long load cannot pile up runs
//! without bound. Each of the run's cells is merged into sled by LWW, sled is flushed,
//! and only then is the run removed from its set and its file deleted (and
//! the directory synced). A crash before the deletion folds the run again
//! on the next open: merging is idempotent. Sled is written before the run
//! leaves its set, so a reader that no longer sees the run sees its cells
//! in sled.
//!
//! # Files
//! `<runs dir>/<keyspace id>/<sequence>.run`, see [`file`] for the layout.
//! A run is complete once renamed from `.run.tmp`; leftover temporary files
//! are deleted at open. A run that does not check at open is left on disk,
//! counted as damage ([`crate::Store::run_damage`]) and not read: its cells
//! are missing from this node until a repair. One whose block does not
//! check when the fold reads it is set aside the same way (renamed
//! `.run.damaged`), so a damaged run cannot stall the fold or the purges
//! that fold first.
//!
//! # Invariants
//! - `Load` and the keyspace counts are sled's counts plus the runs' (from
//!   their footers): a key held both in sled and in a run counts twice
//!   until the fold, as it is stored twice.
//! - Runs are immutable; a run's cells are strictly increasing by data key.

pub(crate) mod file;
pub(crate) mod overlay;
pub(crate) mod set;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::error::{Result, StorageError};
use crate::file_system::FileSystem;
use crate::live_size::KeyspaceCounts;
pub(crate) use file::Run;
pub(crate) use file::RunWriter;
pub(crate) use overlay::ReadThrough;
use ringstore_cell::KeyspaceId;
pub(crate) use set::RunSet;

/// Unfolded runs at which the fold goes on even while runs are being
/// written: a long bulk load (a repair of a big range, a join of a big
/// node) then folds as it goes, which bounds the runs a read consults and
/// the files held open (64 runs of 64 MiB: 4 GiB waiting).
pub(crate) const FOLD_ANYWAY_AT: usize = 64;

/// Every keyspace's runs, their directory, and what the fold waits on.
pub(crate) struct RunStore {
    files: Arc<dyn FileSystem>,
    dir: PathBuf,
    sets: Mutex<HashMap<KeyspaceId, Arc<RunSet>>>,
    next_sequence: AtomicU64,
    /// Runs being written and bulk loads holding the fold off
    /// ([`RunStore::hold`]): the fold waits while there are any, so it does
    /// not take the CPU from the stream that writes them.
    writing: AtomicUsize,
    /// Set when the store closes; the fold thread waits on `wake`.
    stopped: Mutex<bool>,
    wake: Condvar,
    /// Held while a run is folded: by the fold thread, or by a purge that
    /// folds a keyspace first.
    pub(crate) folding: Mutex<()>,
    /// Runs found damaged: at open, or by the fold.
    damaged: AtomicUsize,
}

impl RunStore {
    /// Opens the runs in `dir` (created if missing). Runs of keyspaces
    /// `is_dropped` says were dropped are deleted.
    pub(crate) fn open(
        files: Arc<dyn FileSystem>,
        dir: &Path,
        is_dropped: impl Fn(KeyspaceId) -> Result<bool>,
    ) -> Result<RunStore> {
        files.create_dir_all(dir).map_err(StorageError::Disk)?;
        let mut sets: HashMap<KeyspaceId, Arc<RunSet>> = HashMap::new();
        let mut highest = 0u64;
        let mut damaged = 0;
        let mut entries = files.read_dir(dir).map_err(StorageError::Disk)?;
        entries.sort();
        for path in entries {
            let Some(ks) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse().ok())
                .map(KeyspaceId)
            else {
                continue;
            };
            if is_dropped(ks)? {
                files.remove_dir_all(&path).map_err(StorageError::Disk)?;
                continue;
            }
            let mut run_files = files.read_dir(&path).map_err(StorageError::Disk)?;
            run_files.sort();
            for file in run_files {
                let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.ends_with(".run.tmp") {
                    files.remove_file(&file).map_err(StorageError::Disk)?;
                    continue;
                }
                let Some(sequence) = name
                    .strip_suffix(".run")
                    .and_then(|s| s.parse::<u64>().ok())
                else {
                    continue;
                };
                highest = highest.max(sequence);
                match Run::open(files.as_ref(), file.clone()) {
                    Ok(run) => sets.entry(ks).or_default().add(Arc::new(run)),
                    Err(error) if error.is_corruption() => {
                        tracing::error!(%error, "a run file does not check; its cells are not read (run a repair)");
                        damaged += 1;
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        Ok(RunStore {
            files,
            dir: dir.to_path_buf(),
            sets: Mutex::new(sets),
            next_sequence: AtomicU64::new(highest + 1),
            writing: AtomicUsize::new(0),
            stopped: Mutex::new(false),
            wake: Condvar::new(),
            folding: Mutex::new(()),
            damaged: AtomicUsize::new(damaged),
        })
    }

    /// The runs of `ks` (an empty set if it has none).
    pub(crate) fn set(&self, ks: KeyspaceId) -> Arc<RunSet> {
        Arc::clone(lock(&self.sets).entry(ks).or_default())
    }

    /// The runs of `ks`, if it has had any since the store opened.
    pub(crate) fn existing_set(&self, ks: KeyspaceId) -> Option<Arc<RunSet>> {
        lock(&self.sets).get(&ks).cloned()
    }

    /// A writer for a new run of `ks`; counted as being written until
    /// [`RunStore::written`].
    pub(crate) fn create(&self, ks: KeyspaceId) -> Result<RunWriter> {
        let dir = self.dir.join(ks.0.to_string());
        self.files
            .create_dir_all(&dir)
            .map_err(StorageError::Disk)?;
        let sequence = self.next_sequence.fetch_add(1, Ordering::Relaxed);
        let writer = RunWriter::create(
            Arc::clone(&self.files),
            dir.join(format!("{sequence:020}.run")),
        )?;
        self.writing.fetch_add(1, Ordering::AcqRel);
        Ok(writer)
    }

    /// Holds the fold off as a run being written does, until
    /// [`RunStore::written`].
    pub(crate) fn hold(&self) {
        self.writing.fetch_add(1, Ordering::AcqRel);
    }

    /// A writer from [`RunStore::create`] is finished or abandoned, or a
    /// [`RunStore::hold`] released.
    pub(crate) fn written(&self) {
        self.writing.fetch_sub(1, Ordering::AcqRel);
        self.wake.notify_all();
    }

    /// Adds a finished run of `ks` and wakes the fold.
    pub(crate) fn add(&self, ks: KeyspaceId, run: Arc<Run>) {
        self.set(ks).add(run);
        self.wake.notify_all();
    }

    /// Deletes the runs of `ks`.
    pub(crate) fn drop_keyspace(&self, ks: KeyspaceId) -> Result<()> {
        lock(&self.sets).remove(&ks);
        let dir = self.dir.join(ks.0.to_string());
        match self.files.remove_dir_all(&dir) {
            Ok(()) => file::sync_dir(self.files.as_ref(), &dir),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(StorageError::Disk(error)),
        }
    }

    /// Removes the file of a sealed run that never joined a set (its
    /// keyspace was dropped meanwhile).
    pub(crate) fn discard(&self, run: &Run) {
        let _ = self.files.remove_file(run.path());
    }

    /// Deletes a folded run's file and forgets it.
    pub(crate) fn remove(&self, ks: KeyspaceId, run: &Run) -> Result<()> {
        self.set(ks).remove(run.path());
        match self.files.remove_file(run.path()) {
            Ok(()) => file::sync_dir(self.files.as_ref(), run.path()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(error) => Err(StorageError::Disk(error)),
        }
    }

    /// What the runs of `ks` hold.
    pub(crate) fn counts(&self, ks: KeyspaceId) -> KeyspaceCounts {
        lock(&self.sets)
            .get(&ks)
            .map(|set| set.counts())
            .unwrap_or_default()
    }

    /// The size of every run file.
    pub(crate) fn file_bytes(&self) -> u64 {
        lock(&self.sets).values().map(|s| s.file_bytes()).sum()
    }

    /// Runs that did not check, at open or when folded.
    pub(crate) fn damaged(&self) -> usize {
        self.damaged.load(Ordering::Relaxed)
    }

    /// Sets aside a run the fold found damaged: no longer read, renamed to
    /// `….run.damaged` for inspection, and counted. Its cells before the
    /// damage are in the engine already; the rest need a repair.
    pub(crate) fn set_aside(&self, ks: KeyspaceId, run: &Run) -> Result<()> {
        self.set(ks).remove(run.path());
        self.damaged.fetch_add(1, Ordering::Relaxed);
        let aside = run.path().with_extension("run.damaged");
        self.files
            .rename(run.path(), &aside)
            .map_err(StorageError::Disk)?;
        file::sync_dir(self.files.as_ref(), &aside)
    }

    /// The next run to fold (the one with the lowest sequence, so runs fold
    /// in the order they were written), once no run is being written and
    /// no bulk load holds the fold off, or once [`FOLD_ANYWAY_AT`] runs wait;
    /// `None` once the store is stopping or `alive` says it is gone.
    /// Blocks until then.
    /// (Sequences are zero-padded, so file names sort as they do.)
    pub(crate) fn next_to_fold(&self, alive: &dyn Fn() -> bool) -> Option<(KeyspaceId, Arc<Run>)> {
        let mut stopped = lock(&self.stopped);
        loop {
            if *stopped || !alive() {
                return None;
            }
            if let Some(next) = self.ready_to_fold() {
                return Some(next);
            }
            stopped = self
                .wake
                .wait_timeout(stopped, std::time::Duration::from_secs(1))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The next run to fold if the fold may go on now (see
    /// [`RunStore::next_to_fold`]), without waiting.
    pub(crate) fn ready_to_fold(&self) -> Option<(KeyspaceId, Arc<Run>)> {
        let runs = self.all();
        let held = self.writing.load(Ordering::Acquire) > 0;
        if held && runs.len() < FOLD_ANYWAY_AT {
            return None;
        }
        oldest(runs)
    }

    /// Whether the store is stopping.
    pub(crate) fn is_stopped(&self) -> bool {
        *lock(&self.stopped)
    }

    /// Every run, with its keyspace.
    pub(crate) fn all(&self) -> Vec<(KeyspaceId, Arc<Run>)> {
        lock(&self.sets)
            .iter()
            .flat_map(|(ks, set)| set.all().into_iter().map(move |run| (*ks, run)))
            .collect()
    }

    /// Waits `pause`, or less if the store stops meanwhile.
    pub(crate) fn rest(&self, pause: std::time::Duration) {
        let stopped = lock(&self.stopped);
        if !*stopped {
            let _ = self.wake.wait_timeout(stopped, pause);
        }
    }

    /// Stops the fold thread at its next step.
    pub(crate) fn stop(&self) {
        *lock(&self.stopped) = true;
        self.wake.notify_all();
    }
}

/// The run with the lowest sequence.
fn oldest(runs: Vec<(KeyspaceId, Arc<Run>)>) -> Option<(KeyspaceId, Arc<Run>)> {
    runs.into_iter()
        .min_by(|a, b| a.1.path().file_name().cmp(&b.1.path().file_name()))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
