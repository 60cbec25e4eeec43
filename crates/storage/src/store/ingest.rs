//! Bulk loads through runs (see `runs`): writing a run, and folding runs
//! into the engine.

use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use super::{Store, lock, token_of};
use crate::error::{Result, StorageError};
use crate::key_encoding::encode_data_key;
use crate::live_size::{self, StoredCell};
use crate::runs::{Run, RunStore, RunWriter};
use ringstore_cell::Cell;
use ringstore_cell::KeyspaceId;

/// Cells folded under one hold of the store's write lock: a close or a
/// snapshot waits for at most this many.
const FOLD_BATCH: usize = 256;
/// How often a simulation's fold task looks for a run to fold.
const FOLD_POLL: Duration = Duration::from_millis(100);

/// A run being written by a bulk load ([`Store::start_run`]). Dropped
/// unsealed, its file is removed.
pub struct RunIngest {
    ks: KeyspaceId,
    writer: Option<RunWriter>,
    runs: Arc<RunStore>,
}

impl Drop for RunIngest {
    fn drop(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.abandon();
            self.runs.written();
        }
    }
}

impl RunIngest {
    /// Seals the run being written (if it has cells) and adds it to the
    /// keyspace's runs.
    fn seal(&mut self, store: &Store) -> Result<()> {
        let Some(writer) = self.writer.take() else {
            return Ok(());
        };
        let finished = writer.finish();
        self.runs.written();
        let Some(run) = finished? else {
            return Ok(());
        };
        // Held off while writes are (a snapshot reads one point in time).
        store.write(|| {
            if lock(&store.inner.keyspaces).dropped.contains(&self.ks) {
                self.runs.discard(&run);
                return Err(StorageError::KeyspaceDropped { keyspace: self.ks });
            }
            self.runs.add(self.ks, Arc::new(run));
            Ok(())
        })?;
        Ok(())
    }
}

/// Holds the fold off while a bulk load is under way ([`Store::hold_fold`]):
/// released when dropped.
pub struct FoldHold {
    runs: Option<Arc<RunStore>>,
}

impl Drop for FoldHold {
    fn drop(&mut self) {
        if let Some(runs) = self.runs.take() {
            runs.written();
        }
    }
}

impl Store {
    /// Holds the fold off until the returned guard is dropped: a bulk load
    /// (all the ranges of one stream operation) takes it for its whole
    /// length, so the fold does not start in the gap between one run's
    /// seal and the next run's start and take CPU from the streams.
    pub fn hold_fold(&self) -> FoldHold {
        FoldHold {
            runs: self.inner.runs.get().map(|runs| {
                runs.hold();
                Arc::clone(runs)
            }),
        }
    }

    /// Starts a run of `ks` for a bulk load, or `None` when the store keeps
    /// no runs (then apply the cells with [`Store::apply_many_unflushed`]).
    /// Cells appended to it ([`Store::append_run`]) are neither readable
    /// nor durable until [`Store::seal_run`] returns; after that they are
    /// both, and the fold merges them into the engine in the background.
    pub fn start_run(&self, ks: KeyspaceId) -> Result<Option<RunIngest>> {
        let Some(runs) = self.inner.runs.get() else {
            return Ok(None);
        };
        self.keyspace_tree(ks)?;
        Ok(Some(RunIngest {
            ks,
            writer: Some(runs.create(ks)?),
            runs: Arc::clone(runs),
        }))
    }

    /// Appends `cells` (keys of the run's keyspace) to the run. Cells should
    /// come in `(token, key)` order; one that does not seals the run so far
    /// and starts another.
    pub async fn append_run(
        &self,
        mut ingest: RunIngest,
        cells: Vec<(Vec<u8>, Cell)>,
    ) -> Result<RunIngest> {
        self.off_worker(move |store| {
            for (key, cell) in cells {
                let data_key = encode_data_key(token_of(&key)?, &key);
                let in_order = ingest
                    .writer
                    .as_ref()
                    .and_then(RunWriter::last_key)
                    .is_none_or(|last| data_key.as_slice() > last);
                if !in_order || ingest.writer.is_none() {
                    ingest.seal(store)?;
                    ingest.writer = Some(ingest.runs.create(ingest.ks)?);
                }
                let writer = ingest.writer.as_mut().expect("just ensured");
                writer.append(&data_key, &cell.encode())?;
            }
            Ok(ingest)
        })
        .await
    }

    /// Seals the run: synced to disk, readable, and handed to the fold.
    pub async fn seal_run(&self, mut ingest: RunIngest) -> Result<()> {
        self.off_worker(move |store| ingest.seal(store)).await
    }

    /// Whether the store keeps runs ([`Store::start_run`] gives one).
    pub fn keeps_runs(&self) -> bool {
        self.inner.runs.get().is_some()
    }

    /// Runs not yet folded into the engine, and their cells.
    pub fn runs_pending(&self) -> (usize, u64) {
        let Some(runs) = self.inner.runs.get() else {
            return (0, 0);
        };
        runs.all().iter().fold((0, 0), |(n, cells), (_, run)| {
            (n + 1, cells + run.counts().keys)
        })
    }

    /// Run files that did not check when the store opened or when the fold
    /// read them (their unread cells are missing from this node until a
    /// repair).
    pub fn run_damage(&self) -> usize {
        self.inner.runs.get().map_or(0, |runs| runs.damaged())
    }

    /// Folds every run of `ks` into the engine now (blocking): before a
    /// purge, so removing a key cannot uncover an older cell in a run.
    pub(super) fn fold_keyspace(&self, ks: KeyspaceId) -> Result<()> {
        let Some(runs) = self.inner.runs.get() else {
            return Ok(());
        };
        let _folding = lock(&runs.folding);
        for run in runs.set(ks).all() {
            self.fold_run(runs, ks, &run)?;
        }
        Ok(())
    }

    /// Merges every cell of `run` into the engine, flushes, then removes
    /// the run; a run found damaged is set aside instead (see `runs`).
    /// Stops early, leaving the run, if the store is closing.
    fn fold_run(&self, runs: &RunStore, ks: KeyspaceId, run: &Arc<Run>) -> Result<()> {
        match self.fold_cells(runs, ks, run) {
            Err(error) if error.is_corruption() => {
                tracing::error!(%error, "a run does not check; set aside, its remaining cells need a repair");
                self.inner.engine.flush()?;
                runs.set_aside(ks, run)
            }
            other => other,
        }
    }

    fn fold_cells(&self, runs: &RunStore, ks: KeyspaceId, run: &Arc<Run>) -> Result<()> {
        let (tree, live_counts) = self.keyspace_tree(ks)?;
        let mut cells = run.range(Bound::Unbounded, Bound::Unbounded).peekable();
        while cells.peek().is_some() {
            if runs.is_stopped() {
                return Ok(());
            }
            self.write(|| {
                for entry in cells.by_ref().take(FOLD_BATCH) {
                    let (data_key, cell) = entry?;
                    let damage = &self.inner.damage;
                    fold_cell(tree.as_ref(), &live_counts, damage, ks, &data_key, &cell)?;
                }
                Ok(())
            })?;
        }
        self.inner.engine.flush()?;
        runs.remove(ks, run)
    }

    /// Starts the thread that folds runs into the engine; on a
    /// deterministic simulation's thread ([`crate::offload`]) a task that
    /// folds inline instead, in the simulation's order.
    pub(super) fn spawn_folder(&self) {
        let Some(runs) = self.inner.runs.get().cloned() else {
            return;
        };
        let store = Arc::downgrade(&self.inner);
        if crate::offload::runs_inline() {
            tokio::spawn(async move {
                while !runs.is_stopped() {
                    let Some(inner) = store.upgrade() else { return };
                    let pause = match runs.ready_to_fold() {
                        Some((ks, run)) => Store { inner }.fold_next(&runs, ks, &run),
                        None => Some(FOLD_POLL),
                    };
                    if let Some(pause) = pause {
                        tokio::time::sleep(pause).await;
                    }
                }
            });
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("ringstore-fold".into())
            .spawn(move || {
                let alive = || store.strong_count() > 0;
                while let Some((ks, run)) = runs.next_to_fold(&alive) {
                    let Some(inner) = store.upgrade() else { break };
                    if let Some(pause) = (Store { inner }).fold_next(&runs, ks, &run) {
                        runs.rest(pause);
                    }
                }
            });
        match spawned {
            Ok(handle) => *lock(&self.inner.folder) = Some(handle),
            Err(error) => tracing::error!(%error, "could not start the run fold thread"),
        }
    }

    /// Folds `run` of `ks`, which the fold picked, unless a purge folded it
    /// meanwhile; how long to rest before the next try after a failure.
    fn fold_next(&self, runs: &RunStore, ks: KeyspaceId, run: &Arc<Run>) -> Option<Duration> {
        let folded = {
            let _folding = lock(&runs.folding);
            // A purge may have folded it meanwhile; its file is gone but
            // still readable, and folding it again would bring back what
            // the purge removed.
            if runs.set(ks).contains(run.path()) {
                self.fold_run(runs, ks, run)
            } else {
                Ok(())
            }
        };
        match folded {
            Ok(()) | Err(StorageError::KeyspaceDropped { .. } | StorageError::Closed) => None,
            Err(error) => {
                tracing::error!(%error, run = ?run.path(), "folding a run failed; retrying in a second");
                Some(Duration::from_secs(1))
            }
        }
    }

    /// Stops the fold thread (a run it was folding stays for the next open).
    pub(super) async fn stop_folder(&self) {
        let Some(runs) = self.inner.runs.get() else {
            return;
        };
        runs.stop();
        let handle = lock(&self.inner.folder).take();
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
    }
}

/// Merges one run cell into the engine's tree by LWW, keeping the live
/// counts (the run's own counts leave with the run). A stored cell that does
/// not read back is replaced, as a write's merge replaces it
/// (`Store::merge`), and counted and logged.
fn fold_cell(
    tree: &dyn crate::engine::Tree,
    live_counts: &live_size::LiveCounters,
    damage: &crate::damage::DamageCount,
    ks: KeyspaceId,
    data_key: &[u8],
    cell: &[u8],
) -> Result<()> {
    let mut change = (None, None);
    let mut damaged = None;
    tree.update_expecting_absent(data_key, &mut |stored| {
        // Overwritten on every call: the engine may retry.
        let (newest, error) = super::newest_readable(stored, Some(cell));
        damaged = error;
        // Nothing readable: the damaged bytes stay (a read of them fails,
        // where an absent key would answer "no cell").
        let winner = match newest {
            Some((bytes, cell)) => Some(super::current_format(bytes, &cell)),
            None => stored.map(<[u8]>::to_vec),
        };
        change = (
            stored.map(StoredCell::of),
            winner.as_deref().map(StoredCell::of),
        );
        winner
    })?;
    live_size::account(live_counts, data_key, change.0, change.1);
    if let Some(error) = damaged {
        let key = crate::key_encoding::decode_data_key(data_key)
            .ok()
            .map(|(_, key)| key);
        damage.note_and_log(
            ks,
            key,
            "the fold kept the newest cell that reads back",
            &error,
        );
    }
    Ok(())
}
