//! What a node keeps for repair: the trees it built for sessions, the
//! validation throttle, its repair history, and the progress of the repair
//! it coordinates.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ringstore_placement::TokenRange;
use ringstore_repair::{MerkleTree, RepairHistory, RepairJob, UnitState};
use ringstore_storage::{KeyspaceId, Store, Timestamp};
use ringstore_streaming::StreamThrottle;
use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use crate::error::Result;

/// The metadata record of the repair history.
const HISTORY_RECORD: &str = "repair_history";

/// How long a session's tree is kept without being asked for.
const TREE_IDLE: Duration = Duration::from_secs(300);
/// The most trees kept at once (each at most 1 MiB).
const MAX_TREES: usize = 64;

/// A node's repair state. One per node, in its context.
pub struct RepairState {
    /// Trees built for repair sessions, by session and range.
    pub trees: TreeCache,
    /// Paces the reads of tree building (`repair.validation_mib_per_sec`).
    pub validation: Arc<StreamThrottle>,
    /// When each range of each keyspace was last repaired.
    pub history: HistoryStore,
    /// The repair this node coordinates (or coordinated last).
    pub progress: watch::Sender<Option<JobProgress>>,
    /// Held while this node coordinates a repair (a command or a scheduled
    /// range): one at a time. A tokio lock: held across the whole repair.
    pub running: Arc<tokio::sync::Mutex<()>>,
    /// What repairs and garbage collection did since the node started.
    pub stats: RepairStats,
}

/// Counters of repairs coordinated here and of garbage collection, for the
/// metrics.
#[derive(Debug, Default)]
pub struct RepairStats {
    /// Units repaired.
    pub ranges_repaired: AtomicU64,
    /// Units whose repair failed.
    pub ranges_failed: AtomicU64,
    /// Keys found differing.
    pub mismatched_keys: AtomicU64,
    /// Rows written to replicas that lacked them.
    pub rows_sent: AtomicU64,
    /// Bytes exchanged with other nodes.
    pub bytes: AtomicU64,
    /// Cells purged by garbage collection.
    pub purged: AtomicU64,
}

impl RepairStats {
    /// Counts what became of one unit.
    pub fn count(&self, state: &UnitState) {
        match state {
            UnitState::Pending => {}
            UnitState::Failed(_) => {
                self.ranges_failed.fetch_add(1, Ordering::Relaxed);
            }
            UnitState::Done(report) => {
                self.ranges_repaired.fetch_add(1, Ordering::Relaxed);
                self.mismatched_keys
                    .fetch_add(report.mismatched_keys, Ordering::Relaxed);
                self.rows_sent
                    .fetch_add(report.rows_sent, Ordering::Relaxed);
                self.bytes.fetch_add(report.bytes, Ordering::Relaxed);
            }
        }
    }
}

impl RepairState {
    /// The state of a node whose store is `store`.
    pub fn load(store: &Store, validation_mib_per_sec: u64) -> Result<RepairState> {
        Ok(RepairState {
            trees: TreeCache::default(),
            validation: Arc::new(StreamThrottle::new(validation_mib_per_sec)),
            history: HistoryStore::load(store)?,
            progress: watch::channel(None).0,
            running: Arc::new(tokio::sync::Mutex::new(())),
            stats: RepairStats::default(),
        })
    }
}

/// What the job in progress (or the last one) looks like.
#[derive(Clone, Debug)]
pub struct JobProgress {
    /// The job, as checkpointed.
    pub job: RepairJob,
    /// Where it stands.
    pub state: JobState,
    /// When this run of it started (for the ETA).
    pub started: Instant,
    /// Units already done when this run started (resumed jobs).
    pub done_at_start: usize,
}

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Units are being repaired.
    Running,
    /// Every unit was repaired (or compared, in a dry run).
    Finished,
    /// It ended with failed units.
    Failed,
}

impl JobState {
    /// The name `repair status` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Finished => "finished",
            JobState::Failed => "failed",
        }
    }
}

impl JobProgress {
    /// Seconds until the job ends, from the pace of this run.
    pub fn eta_seconds(&self) -> Option<f64> {
        let totals = self.job.totals();
        let finished = totals.done + totals.failed;
        let done_now = finished.checked_sub(self.done_at_start)?;
        if done_now == 0 || self.state != JobState::Running {
            return None;
        }
        let per_unit = self.started.elapsed().as_secs_f64() / done_now as f64;
        Some(per_unit * (totals.units - finished) as f64)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The key of a kept tree.
type TreeKey = (Uuid, KeyspaceId, TokenRange);

/// Trees built for sessions, dropped when the session ends, after
/// [`TREE_IDLE`] unused, or (oldest first) beyond [`MAX_TREES`].
#[derive(Default)]
pub struct TreeCache {
    trees: Mutex<HashMap<TreeKey, (Arc<MerkleTree>, Instant)>>,
}

impl TreeCache {
    /// Keeps `tree` for `session`.
    pub fn insert(&self, session: Uuid, keyspace: KeyspaceId, tree: Arc<MerkleTree>) {
        let mut trees = lock(&self.trees);
        trees.retain(|_, (_, used)| used.elapsed() < TREE_IDLE);
        while trees.len() >= MAX_TREES {
            let oldest = trees
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(key, _)| *key)
                .expect("not empty");
            trees.remove(&oldest);
        }
        trees.insert((session, keyspace, tree.range()), (tree, Instant::now()));
    }

    /// The tree of `range` kept for `session`, if any.
    pub fn get(
        &self,
        session: Uuid,
        keyspace: KeyspaceId,
        range: TokenRange,
    ) -> Option<Arc<MerkleTree>> {
        let mut trees = lock(&self.trees);
        let (tree, used) = trees.get_mut(&(session, keyspace, range))?;
        *used = Instant::now();
        Some(Arc::clone(tree))
    }

    /// Drops the trees of `session`.
    pub fn end_session(&self, session: Uuid) {
        lock(&self.trees).retain(|(id, _, _), _| *id != session);
    }
}

/// The repair history, persisted in the store's metadata.
pub struct HistoryStore {
    store: Store,
    history: Mutex<RepairHistory>,
    /// Held from an update until its bytes are stored, so that records
    /// are saved in the order they were made. A tokio lock: held across
    /// the write.
    saving: tokio::sync::Mutex<()>,
}

impl HistoryStore {
    /// The history as last saved. A record that cannot be decoded is
    /// replaced by an empty history (with a warning): that only delays
    /// garbage collection until the next repair.
    fn load(store: &Store) -> Result<HistoryStore> {
        let history = match store.meta_get(HISTORY_RECORD)? {
            None => RepairHistory::default(),
            Some(bytes) => RepairHistory::decode(&bytes).unwrap_or_else(|| {
                tracing::warn!("the saved repair history is corrupt; starting from none");
                RepairHistory::default()
            }),
        };
        Ok(HistoryStore {
            store: store.clone(),
            history: Mutex::new(history),
            saving: tokio::sync::Mutex::new(()),
        })
    }

    /// A copy of the history.
    pub fn snapshot(&self) -> RepairHistory {
        lock(&self.history).clone()
    }

    /// Records `ranges` as repaired by a repair that began at `began`, durably.
    pub async fn record(
        &self,
        ranges: &[(KeyspaceId, TokenRange)],
        began: Timestamp,
    ) -> Result<()> {
        let _saving = self.saving.lock().await;
        let bytes = {
            let mut history = lock(&self.history);
            for &(keyspace, range) in ranges {
                history.record(keyspace, range, began);
            }
            history.encode()
        };
        self.store.meta_put(HISTORY_RECORD, &bytes).await?;
        Ok(())
    }
}
