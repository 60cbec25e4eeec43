//! `Store`: cells by keyspace and key over any [`Engine`], with last-write-wins
//! merging and the node's durability policy.
//!
//! # Layout
//! - `data/<keyspace uuid>`: one tree per keyspace; key `token ++ key`
//!   ([`key_encoding`](crate::key_encoding)), value an encoded [`Cell`].
//! - `system`: node metadata by name (host id, tokens, schema…), written
//!   durably whatever the mode.
//! - `hints`: reserved for hinted handoff; its format belongs to its user.
//! - `paxos`: each key's Paxos acceptor state, durable on return of
//!   [`Store::paxos_put`] whatever the mode; its format belongs to its user
//!   (`store/paxos.rs`).
//!
//! # Writes
//! [`Store::apply`] merges the incoming cell with the stored one in one atomic
//! [`Tree::update`], so concurrent writes to a key converge on the
//! [`Cell::reconcile`] winner whatever their order. It then waits according to
//! the [`Durability`]: in batch mode for the commit log to hold the winner
//! ([`commit_log`](crate::commit_log), when the store was opened with one) or
//! else for a group-committed flush covering the write
//! ([`group_commit`](crate::group_commit)); in periodic mode not at all.
//! [`Store::apply_many_unflushed`] and [`Store::meta_put_unflushed`] never
//! wait: bulk loads (stream chunks) make their progress durable themselves.
//!
//! # Load
//! Every write moves its keyspace's count of live bytes by the change in the
//! bytes stored for its key ([`Store::load_bytes`]), and its counts of keys
//! and tombstones likewise ([`Store::keyspace_counts`]; `live_size` explains
//! how the counts survive restarts). sled's file size is [`Store::disk_bytes`].
//!
//! # Shutdown
//! [`Store::close`] refuses further writes, waits for writes in progress,
//! stops the periodic flusher, saves the live-byte counts and flushes. Dropping the last clone stops the
//! flusher too (it flushes once more on its way out).
//!
//! # Threads
//! sled may block on I/O (a page fault, a log segment rollover). Work that
//! loops over many keys ([`Store::apply_many`] of several, [`Store::purge`],
//! [`Store::purge_unchanged`], [`Store::drop_keyspace`], [`Store::meta_put`]) therefore runs on tokio's
//! blocking pool, never on an async worker, and [`Store::scan`] is for
//! callers already off the workers (a `spawn_blocking` task). A single-key
//! [`Store::apply`] or [`Store::read`] runs inline: it takes microseconds
//! when sled's cache holds the key, and sending each one to the blocking
//! pool cost 15–22 % of the throughput of `ringstore stress` on a 2-core
//! machine (measured with `benches/stress.sh`); a cache miss blocks one
//! worker for one disk read.
//!
//! # Caveats
//! - Reading or scanning a keyspace that was never written creates its empty
//!   tree.
//! - Dropped keyspace ids refuse reads and writes until the store closes;
//!   after a restart only the commit log's replay remembers them (the
//!   `system` tree records each drop). The schema layer must not reuse them
//!   (it never does: a re-created keyspace derives its id from the dropped
//!   one's).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use ringstore_placement::{Murmur3Partitioner, TokenRange};

use crate::commit_log::{self, CommitLog, CommitLogOptions, LogPosition};
use crate::damage::DamageCount;
use crate::data_tree::DataTree;
use crate::durability::Durability;
use crate::engine::{Engine, Tree};
use crate::error::{Result, StorageError};
use crate::file_system::{FileSystem, OsFileSystem};
use crate::group_commit::{GroupCommit, Ticket};
use crate::key_encoding::encode_data_key;
use crate::live_size::{self, KeyspaceCounts, LiveCounts, StoredCell};
use crate::periodic_flush::PeriodicFlusher;
use crate::runs::{ReadThrough, RunSet, RunStore};
use crate::scan::Scan;
use ringstore_cell::Cell;
use ringstore_cell::KeyspaceId;

mod ingest;
mod paxos;
pub use ingest::{FoldHold, RunIngest};
pub use paxos::PAXOS_TREE;

/// The tree of node metadata.
pub const SYSTEM_TREE: &str = "system";
/// The tree reserved for hinted handoff.
pub const HINTS_TREE: &str = "hints";
/// The prefix of the `system` tree's record of a dropped keyspace: the
/// commit log's replay skips that keyspace's records.
const DROPPED_KEYSPACE_PREFIX: &str = "dropped_keyspace/";

/// What a write expects at its key, which decides how the engine looks
/// first (the outcome is the same either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyPresence {
    /// No idea: look the key up, then swap.
    Unknown,
    /// Most likely absent (a bulk load into a range new to the node): try
    /// the insert first, look only if that fails.
    LikelyAbsent,
}

/// The node's storage: cells by keyspace and key, merged by last-write-wins,
/// durable as its [`Durability`] says (see the crate docs).
///
/// Cheap to clone: all clones share one engine, one group commit and, in
/// periodic mode, one background flusher, which stops (after a last flush)
/// when [`Store::close`] is called or the last clone is dropped. Writes are
/// `async` because they may wait for a flush; reads never wait.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Arc<dyn Engine>,
    durability: Durability,
    group: Arc<GroupCommit>,
    keyspaces: Mutex<KeyspaceTrees>,
    system: Arc<dyn Tree>,
    hints: Arc<dyn Tree>,
    /// Per-key Paxos acceptor state (`store/paxos.rs`).
    paxos: Arc<dyn Tree>,
    /// `true` once closed. Writers hold the read lock while they write (never
    /// across an `.await`), so `close` taking the write lock waits for writes
    /// in progress.
    closed: RwLock<bool>,
    flusher: Option<PeriodicFlusher>,
    /// The commit log, in batch durability when the store was opened with
    /// one; set once, after its replay.
    log: OnceLock<Arc<CommitLog>>,
    /// Damaged places the commit log's replay found (see
    /// [`Store::commit_log_damage`]); set once, at open.
    log_damage: OnceLock<usize>,
    /// The runs of bulk loads not yet folded into the engine, when the
    /// store keeps them (see `runs`); set once, at open.
    runs: OnceLock<Arc<RunStore>>,
    /// The thread folding runs into the engine.
    folder: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Damaged cells met since the store opened (see `damage`).
    damage: Arc<DamageCount>,
}

/// Open data trees, the live bytes of every stored keyspace, and the ids
/// dropped since the store opened.
#[derive(Default)]
struct KeyspaceTrees {
    open: HashMap<KeyspaceId, Arc<dyn Tree>>,
    live_counts: HashMap<KeyspaceId, LiveCounts>,
    dropped: HashSet<KeyspaceId>,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("durability", &self.inner.durability)
            .field("closed", &*read(&self.inner.closed))
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Critical sections here only insert into and remove from maps.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read(closed: &RwLock<bool>) -> std::sync::RwLockReadGuard<'_, bool> {
    closed.read().unwrap_or_else(PoisonError::into_inner)
}

fn token_of(key: &[u8]) -> Result<ringstore_placement::Token> {
    Murmur3Partitioner::token(key).map_err(|source| StorageError::InvalidKey { source })
}

impl Store {
    /// A store over `engine` with the given durability. In periodic mode this
    /// starts the background flusher.
    ///
    /// # Panics
    /// In periodic mode, outside a tokio runtime.
    pub fn open(engine: Arc<dyn Engine>, durability: Durability) -> Result<Store> {
        let system = engine.open_tree(SYSTEM_TREE)?;
        let hints = engine.open_tree(HINTS_TREE)?;
        let paxos = engine.open_tree(PAXOS_TREE)?;
        let live_counts = live_size::recover(engine.as_ref(), system.as_ref())?;
        let group = Arc::new(GroupCommit::new(Arc::clone(&engine)));
        let flusher = match durability {
            Durability::Batch => None,
            Durability::Periodic { interval } => {
                Some(PeriodicFlusher::spawn(Arc::clone(&group), interval))
            }
        };
        Ok(Store {
            inner: Arc::new(Inner {
                engine,
                durability,
                group,
                keyspaces: Mutex::new(KeyspaceTrees {
                    live_counts,
                    ..KeyspaceTrees::default()
                }),
                system,
                hints,
                paxos,
                closed: RwLock::new(false),
                flusher,
                log: OnceLock::new(),
                log_damage: OnceLock::new(),
                runs: OnceLock::new(),
                folder: Mutex::new(None),
                damage: Arc::default(),
            }),
        })
    }

    /// [`Store::open`] with a commit log in `log.dir`. Whatever the mode, the
    /// records a previous run left there are first merged into the engine,
    /// which is then flushed. In batch durability the store then
    /// acknowledges a write once the log has it on disk (see the
    /// `commit_log` module), flushing the engine only at checkpoints; in
    /// periodic durability the log is not written.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn open_with_commit_log(
        engine: Arc<dyn Engine>,
        durability: Durability,
        log: CommitLogOptions,
    ) -> Result<Store> {
        Store::open_on_disk(engine, durability, log, None)
    }

    /// [`Store::open_with_commit_log`], keeping the runs of bulk loads in
    /// `runs_dir` when one is given (see [`Store::start_run`]): the runs
    /// left there are read before the log is replayed, and a thread folds
    /// them into the engine.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn open_on_disk(
        engine: Arc<dyn Engine>,
        durability: Durability,
        log: CommitLogOptions,
        runs_dir: Option<std::path::PathBuf>,
    ) -> Result<Store> {
        Store::open_on_files(engine, durability, log, runs_dir, OsFileSystem::shared())
    }

    /// [`Store::open_on_disk`] with the commit log and the runs on `files`
    /// instead of the operating system's file system: how a simulation runs
    /// the real store on a disk it can crash, tear and damage
    /// ([`crate::SimulatedFileSystem`]).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn open_on_files(
        engine: Arc<dyn Engine>,
        durability: Durability,
        log: CommitLogOptions,
        runs_dir: Option<std::path::PathBuf>,
        files: Arc<dyn FileSystem>,
    ) -> Result<Store> {
        let store = Store::open(engine, durability)?;
        if let Some(dir) = runs_dir {
            let system = Arc::clone(&store.inner.system);
            let runs = RunStore::open(Arc::clone(&files), &dir, |ks| {
                Ok(system.get(dropped_key(ks).as_bytes())?.is_some())
            })?;
            let _ = store.inner.runs.set(Arc::new(runs));
            store.spawn_folder();
        }
        let mut recovered = commit_log::recover(&log, files.as_ref())?;
        store.replay(std::mem::take(&mut recovered.records))?;
        let _ = store.inner.log_damage.set(recovered.damaged);
        if recovered.undecodable > 0 {
            tracing::warn!(
                records = recovered.undecodable,
                "commit log records that passed their checksum but did not decode were skipped"
            );
        }
        store.inner.engine.flush()?;
        if durability != Durability::Batch {
            recovered.retire()?;
            return Ok(store);
        }
        let started = Arc::new(CommitLog::start(log.clone(), recovered, files)?);
        crate::checkpoint::spawn(&started, Arc::clone(&store.inner.group), &log);
        let _ = store.inner.log.set(started);
        Ok(store)
    }

    /// Merges replayed log records into the engine, skipping keyspaces
    /// recorded as dropped.
    fn replay(&self, records: Vec<commit_log::LogRecord>) -> Result<()> {
        let mut dropped: HashMap<KeyspaceId, bool> = HashMap::new();
        let mut replayed = 0usize;
        let total = records.len();
        for record in records {
            let is_dropped = match dropped.get(&record.ks) {
                Some(&is_dropped) => is_dropped,
                None => {
                    let is_dropped = self
                        .inner
                        .system
                        .get(dropped_key(record.ks).as_bytes())?
                        .is_some();
                    dropped.insert(record.ks, is_dropped);
                    is_dropped
                }
            };
            if !is_dropped {
                self.merge(record.ks, &record.key, record.cell, KeyPresence::Unknown)?;
                replayed += 1;
            }
        }
        if total > 0 {
            tracing::info!(replayed, skipped = total - replayed, "commit log replayed");
        }
        Ok(())
    }

    /// The durability mode the store was opened with.
    pub fn durability(&self) -> Durability {
        self.inner.durability
    }

    /// Merges `cell` into the stored cell of `key` in keyspace `ks` by
    /// last-write-wins and returns the winner (which is what is now stored).
    /// Returns when the write is as durable as the [`Durability`] promises.
    pub async fn apply(&self, ks: KeyspaceId, key: &[u8], cell: Cell) -> Result<Cell> {
        let ((winner, logged), ticket) = self.write(|| {
            let winner = self.merge(ks, key, cell, KeyPresence::Unknown)?;
            let logged = self.log_winner(ks, key, &winner)?;
            Ok((winner, logged))
        })?;
        self.settle(ticket, logged).await?;
        Ok(winner)
    }

    /// [`Store::apply`] for several writes with a single durability wait;
    /// the winners, in order. Not atomic: on an error, the writes before the
    /// failing one are applied (but not waited for).
    pub async fn apply_many(&self, writes: &[(KeyspaceId, Vec<u8>, Cell)]) -> Result<Vec<Cell>> {
        if let [(ks, key, cell)] = writes {
            // One write is a single-key apply: inline (see "Threads").
            return Ok(vec![self.apply(*ks, key, cell.clone()).await?]);
        }
        let writes = writes.to_vec();
        let ((winners, logged), ticket) = self
            .off_worker(move |store| {
                store.write(|| {
                    let mut logged = None;
                    let winners = writes
                        .into_iter()
                        .map(|(ks, key, cell)| {
                            let winner = store.merge(ks, &key, cell, KeyPresence::Unknown)?;
                            logged = logged.max(store.log_winner(ks, &key, &winner)?);
                            Ok(winner)
                        })
                        .collect::<Result<Vec<Cell>>>()?;
                    Ok((winners, logged))
                })
            })
            .await?;
        self.settle(ticket, logged).await?;
        Ok(winners)
    }

    /// [`Store::apply_many`] without waiting for durability, whatever the
    /// mode: the writes become durable with the store's next flush (a batch
    /// write's group commit, the periodic flush, [`Store::sync`], a
    /// [`Store::meta_put`]). For bulk loads that make their progress
    /// durable themselves, now and then, where a flush per chunk of cells
    /// would cost more than the cells.
    ///
    /// Tuned for keys this node does not hold yet (a range it is taking
    /// over): each cell is first tried as an insert into an absent key, and
    /// merged with the stored cell only if one is there
    /// ([`Tree::update_expecting_absent`]). The result is the same either
    /// way; only the cost differs.
    pub async fn apply_many_unflushed(
        &self,
        writes: Vec<(KeyspaceId, Vec<u8>, Cell)>,
    ) -> Result<Vec<Cell>> {
        let (winners, _ticket) = self
            .off_worker(move |store| {
                store.write(|| {
                    writes
                        .into_iter()
                        .map(|(ks, key, cell)| {
                            store.merge(ks, &key, cell, KeyPresence::LikelyAbsent)
                        })
                        .collect::<Result<Vec<Cell>>>()
                })
            })
            .await?;
        Ok(winners)
    }

    /// The stored cell of `key` in `ks` — tombstones and expired cells
    /// included; use [`Cell::visible_value`] for what a client sees. A
    /// stored cell that does not read back is [`StorageError::CorruptCell`]
    /// naming the key (or the engine's own corruption error), counted in
    /// [`Store::corrupt_reads`] and not logged: the caller knows what the
    /// read was for.
    pub fn read(&self, ks: KeyspaceId, key: &[u8]) -> Result<Option<Cell>> {
        let data_key = encode_data_key(token_of(key)?, key);
        let read = self.data_tree(ks)?.get(&data_key).and_then(|bytes| {
            bytes
                .map(|bytes| Cell::decode(&bytes).map_err(StorageError::from))
                .transpose()
        });
        read.map_err(|error| {
            if error.is_corruption() {
                self.inner.damage.note();
            }
            error.at_key(key)
        })
    }

    /// How many times a stored cell did not read back since the store
    /// opened, on any path: reads, the merge of a write (which then replaces
    /// it), scans and the fold (see `damage`).
    pub fn corrupt_reads(&self) -> u64 {
        self.inner.damage.get()
    }

    /// The cells of `ks` whose tokens lie in `range`, in token order: two
    /// byte-range scans for a wrapping range, the whole ring when
    /// `range.start == range.end`. A damaged entry is an error item naming
    /// its key when it can, counted and logged; the scan goes on after it.
    pub fn scan(&self, ks: KeyspaceId, range: TokenRange) -> Result<Scan> {
        Ok(Scan::new(self.data_tree(ks)?, range, self.scan_damage(ks)))
    }

    /// What a scan of `ks` counts and logs its damaged entries with.
    fn scan_damage(&self, ks: KeyspaceId) -> crate::scan::ScanDamage {
        crate::scan::ScanDamage {
            ks,
            count: Arc::clone(&self.inner.damage),
        }
    }

    /// The cells of `ks` strictly after the row `(after, after_key)` (after
    /// every row of token `after` when `after_key` is `None`) up to and
    /// including the rows of token `last`, in `(token, key)` order: how a
    /// paged scan resumes. Empty when `after` lies beyond `last`; never wraps.
    pub fn scan_after(
        &self,
        ks: KeyspaceId,
        after: ringstore_placement::Token,
        after_key: Option<&[u8]>,
        last: ringstore_placement::Token,
    ) -> Result<Scan> {
        Ok(Scan::after_row(
            self.data_tree(ks)?,
            after,
            after_key,
            last,
            self.scan_damage(ks),
        ))
    }

    /// Removes the cells of `keys` from `ks` outright — no tombstone, so
    /// only for data this node no longer replicates (cleanup). Durable on
    /// return, whatever the mode. How many cells were there.
    pub async fn purge(&self, ks: KeyspaceId, keys: &[Vec<u8>]) -> Result<usize> {
        let keys = keys.to_vec();
        self.purge_with(ks, move |tree, live_counts| {
            let mut removed = 0;
            for key in &keys {
                let data_key = encode_data_key(token_of(key)?, key);
                if let Some(old) = tree.remove(&data_key)? {
                    let old = StoredCell::of(&old);
                    live_size::account(live_counts, &data_key, Some(old), None);
                    removed += 1;
                }
            }
            Ok(removed)
        })
        .await
    }

    /// Removes each `(key, cell)` of `ks` whose stored cell is still exactly
    /// `cell` — garbage collection of tombstones and expired cells, which
    /// must keep a write that arrived after the cell was chosen. Durable on
    /// return, whatever the mode. How many cells were removed.
    pub async fn purge_unchanged(
        &self,
        ks: KeyspaceId,
        cells: Vec<(Vec<u8>, Cell)>,
    ) -> Result<usize> {
        self.purge_with(ks, move |tree, live_counts| {
            let mut removed = 0;
            for (key, expected) in &cells {
                let data_key = encode_data_key(token_of(key)?, key);
                let mut purged = None;
                tree.update(&data_key, &mut |stored| {
                    // Overwritten on every call: the engine may retry.
                    let unchanged = stored
                        .is_some_and(|bytes| Cell::decode(bytes).is_ok_and(|c| &c == expected));
                    purged = stored.filter(|_| unchanged).map(StoredCell::of);
                    if unchanged {
                        None
                    } else {
                        stored.map(<[u8]>::to_vec)
                    }
                })?;
                if let Some(old) = purged {
                    live_size::account(live_counts, &data_key, Some(old), None);
                    removed += 1;
                }
            }
            Ok(removed)
        })
        .await
    }

    /// Runs the removals `remove` on the engine's tree of `ks` and its live
    /// counts, after folding the keyspace's runs (so a removal cannot
    /// uncover an older cell in a run); durable on return.
    async fn purge_with(
        &self,
        ks: KeyspaceId,
        remove: impl FnOnce(&dyn Tree, &live_size::LiveCounters) -> Result<usize> + Send + 'static,
    ) -> Result<usize> {
        let (removed, ticket) = self
            .off_worker(move |store| {
                store.fold_keyspace(ks)?;
                store.write(|| {
                    let (tree, live_counts) = store.keyspace_tree(ks)?;
                    remove(tree.as_ref(), &live_counts)
                })
            })
            .await?;
        self.inner.group.wait(ticket).await?;
        Ok(removed)
    }

    /// Deletes every cell of `ks` and retires its id: later reads and writes of
    /// `ks` through this store fail with [`StorageError::KeyspaceDropped`].
    /// Durable on return, whatever the mode. Whether there was a tree to drop.
    pub async fn drop_keyspace(&self, ks: KeyspaceId) -> Result<bool> {
        let (existed, ticket) = self
            .off_worker(move |store| {
                store.write(|| {
                    // Before the tree goes: a replayed commit log must not
                    // bring it back.
                    store.inner.system.insert(dropped_key(ks).as_bytes(), &[])?;
                    {
                        let mut keyspaces = lock(&store.inner.keyspaces);
                        keyspaces.dropped.insert(ks);
                        keyspaces.open.remove(&ks);
                        keyspaces.live_counts.remove(&ks);
                    }
                    if let Some(runs) = store.inner.runs.get() {
                        runs.drop_keyspace(ks)?;
                    }
                    // Outside the lock: dropping a big tree takes a while, and
                    // no one can open it again now that its id is marked
                    // dropped. A write still holding the old handle fails with
                    // `TreeDropped`.
                    store.inner.engine.drop_tree(&ks.data_tree_name())
                })
            })
            .await?;
        self.inner.group.wait(ticket).await?;
        Ok(existed)
    }

    /// The keyspaces that have a data tree in the engine (including any
    /// dropped before a restart whose drop was not flushed).
    pub fn stored_keyspaces(&self) -> Vec<KeyspaceId> {
        let mut ids: Vec<KeyspaceId> = self
            .inner
            .engine
            .tree_names()
            .iter()
            .filter_map(|name| KeyspaceId::from_data_tree_name(name))
            .collect();
        ids.sort();
        ids
    }

    /// The metadata value called `name`, from the `system` tree.
    pub fn meta_get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        self.inner.system.get(name.as_bytes())
    }

    /// Sets the metadata value called `name`; durable on return, whatever the mode.
    pub async fn meta_put(&self, name: &str, value: &[u8]) -> Result<()> {
        let ticket = self.meta_insert(name, value).await?;
        self.inner.group.wait(ticket).await
    }

    /// Sets the metadata value called `name`, durable with the store's next
    /// flush (see [`Store::apply_many_unflushed`]). A flush makes every
    /// write made before it durable, so a value recorded after some writes
    /// is never durable without them: a resume point may follow the data
    /// it points past this way.
    pub async fn meta_put_unflushed(&self, name: &str, value: &[u8]) -> Result<()> {
        self.meta_insert(name, value).await.map(drop)
    }

    /// Inserts a metadata value off the async workers; its flush's ticket.
    async fn meta_insert(&self, name: &str, value: &[u8]) -> Result<Ticket> {
        let (name, value) = (name.to_string(), value.to_vec());
        let ((), ticket) = self
            .off_worker(move |store| {
                store.write(|| store.inner.system.insert(name.as_bytes(), &value).map(drop))
            })
            .await?;
        Ok(ticket)
    }

    /// The tree reserved for hinted handoff. Writes through it bypass the
    /// store's durability: call [`Store::sync`] when they must be durable.
    pub fn hints(&self) -> Arc<dyn Tree> {
        Arc::clone(&self.inner.hints)
    }

    /// The live bytes of every keyspace (keys and encoded cells, tombstones
    /// until they are purged): the load `status` reports. It falls when data
    /// is purged, where the disk size does not (see `live_size`).
    pub fn load_bytes(&self) -> u64 {
        let engine: u64 = lock(&self.inner.keyspaces)
            .live_counts
            .values()
            .map(|counters| counters.get().bytes)
            .sum();
        let runs = self.inner.runs.get().map_or(0, |runs| {
            runs.all().iter().map(|(_, run)| run.counts().bytes).sum()
        });
        engine + runs
    }

    /// The live bytes of keyspace `ks` (see [`Store::load_bytes`]).
    pub fn keyspace_bytes(&self, ks: KeyspaceId) -> u64 {
        self.keyspace_counts(ks).bytes
    }

    /// What keyspace `ks` holds on this node: live bytes, keys and
    /// tombstones, kept by every write (see `live_size`), so asking costs
    /// no scan. Zero for a keyspace never written or dropped.
    pub fn keyspace_counts(&self, ks: KeyspaceId) -> KeyspaceCounts {
        let engine = lock(&self.inner.keyspaces)
            .live_counts
            .get(&ks)
            .map(|counters| counters.get())
            .unwrap_or_default();
        let runs = self
            .inner
            .runs
            .get()
            .map(|runs| runs.counts(ks))
            .unwrap_or_default();
        KeyspaceCounts {
            bytes: engine.bytes + runs.bytes,
            keys: engine.keys + runs.keys,
            tombstones: engine.tombstones + runs.tombstones,
        }
    }

    /// The bytes the engine's files occupy on disk: data, metadata, hints
    /// and the engine's own overhead. sled never shrinks its files, so this
    /// only grows; freed space is reused by later writes.
    pub fn disk_bytes(&self) -> Result<u64> {
        let runs = self.inner.runs.get().map_or(0, |runs| runs.file_bytes());
        Ok(self.inner.engine.size_on_disk()? + runs)
    }

    /// Runs `f` with every write held off (writers in progress finish first,
    /// new ones wait), so what `f` reads of the store is one point in time:
    /// for snapshots. Blocks the calling thread; writers wait on theirs, so
    /// keep `f` short and call it off the async workers.
    pub fn with_writes_paused<T>(&self, f: impl FnOnce() -> T) -> T {
        let _paused = self
            .inner
            .closed
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        f()
    }

    /// Tells `observer` the duration of every engine flush from now on
    /// (group commits, periodic syncs and [`Store::sync`]; for metrics). Only
    /// the first call on a store (or any clone) sets it; whether this one did.
    pub fn observe_syncs(&self, observer: impl Fn(Duration) + Send + Sync + 'static) -> bool {
        self.inner.group.observe(Box::new(observer))
    }

    /// Tells `observer` how long each commit log write took, from the write
    /// to the end of its `fdatasync` (each covers every write appended while
    /// the previous one ran; for metrics). Only the first call sets it;
    /// whether this one did (never, for a store without a log).
    pub fn observe_log_syncs(&self, observer: impl Fn(Duration) + Send + Sync + 'static) -> bool {
        self.inner
            .log
            .get()
            .is_some_and(|log| log.observe(Box::new(observer)))
    }

    /// How many damaged places in synced sections the commit log's replay
    /// found when the store opened: acknowledged writes that may be missing
    /// from this replica, which a repair brings back from the others (the
    /// replay logs each as an error too). Zero without a log.
    pub fn commit_log_damage(&self) -> usize {
        self.inner.log_damage.get().copied().unwrap_or(0)
    }

    /// Watches for the engine's first failed flush (`None` until then). With
    /// sled that failure is for good: it keeps its first I/O error and fails
    /// every later write and flush, so the node must stop serving (its
    /// `disk_failure_policy`) until the disk is mended and it is restarted.
    pub fn failure(&self) -> tokio::sync::watch::Receiver<Option<Arc<StorageError>>> {
        self.inner.group.failure()
    }

    /// Waits until everything written before the call is durable, sharing a
    /// flush with concurrent writers (in either mode).
    pub async fn sync(&self) -> Result<()> {
        self.inner.group.sync().await
    }

    /// Refuses further writes ([`StorageError::Closed`]), waits for writes in
    /// progress, stops the periodic flusher and flushes. Reads still work.
    /// Idempotent; affects every clone.
    pub async fn close(&self) -> Result<()> {
        *self
            .inner
            .closed
            .write()
            .unwrap_or_else(PoisonError::into_inner) = true;
        if let Some(flusher) = &self.inner.flusher {
            flusher.stop().await;
        }
        self.stop_folder().await;
        // No write is in progress now, so the counters are exact: keep them
        // for the next open (see `live_size`).
        live_size::save(
            self.inner.system.as_ref(),
            &lock(&self.inner.keyspaces).live_counts,
        )?;
        // The log first: a write in progress waits for it, and once its
        // writer has stopped, the engine flush covers every logged write.
        if let Some(log) = self.inner.log.get() {
            log.stop().await?;
        }
        self.sync().await?;
        if let Some(log) = self.inner.log.get() {
            log.retire_all();
        }
        Ok(())
    }

    /// Runs `op` on tokio's blocking pool (see "Threads" in the module docs;
    /// inline on a simulation's thread, see [`crate::offload`]).
    async fn off_worker<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let store = self.clone();
        crate::offload::spawn_blocking(move || op(&store))
            .await
            .map_err(|source| StorageError::CallAbandoned { source })?
    }

    /// Runs the write `op` unless the store is closed, and takes its ticket.
    fn write<T>(&self, op: impl FnOnce() -> Result<T>) -> Result<(T, Ticket)> {
        let closed = read(&self.inner.closed);
        if *closed {
            return Err(StorageError::Closed);
        }
        let value = op()?;
        Ok((value, self.inner.group.ticket()))
    }

    /// Appends `winner`, which now stands at `key` of `ks`, to the commit
    /// log if the store has one; its position.
    fn log_winner(&self, ks: KeyspaceId, key: &[u8], winner: &Cell) -> Result<Option<LogPosition>> {
        self.inner
            .log
            .get()
            .map(|log| log.append(ks, key, winner))
            .transpose()
    }

    /// Waits as the durability mode requires: in batch mode for the commit
    /// log to hold position `logged`, or, without a log, for a flush
    /// covering `ticket`. A failure of the log is announced as the engine's
    /// would be ([`Store::failure`]).
    async fn settle(&self, ticket: Ticket, logged: Option<LogPosition>) -> Result<()> {
        match (self.inner.durability, logged, self.inner.log.get()) {
            (Durability::Periodic { .. }, _, _) => Ok(()),
            (Durability::Batch, Some(position), Some(log)) => {
                let outcome = log.wait(position).await;
                if let Err(StorageError::FlushFailed { source }) = &outcome {
                    self.inner.group.report_failure(source);
                }
                outcome
            }
            (Durability::Batch, _, _) => self.inner.group.wait(ticket).await,
        }
    }

    /// Merges `cell` into the stored cell by LWW, atomically; the winner.
    ///
    /// A stored cell (or a run's) that does not read back is treated as
    /// absent: `cell` replaces it, and the damage is counted and logged.
    /// That is safe: the damaged bytes can never be served again, the
    /// replica holding them was as good as one that missed the write, and
    /// whatever newer version they held is on the other replicas, from
    /// which read repair and repair bring it back as they would to any
    /// replica that missed a write. Refusing the merge instead (as this
    /// store once did) kept the damage for good: read repair, repair, hint
    /// replay and the commit log's replay all write through here.
    fn merge(&self, ks: KeyspaceId, key: &[u8], cell: Cell, presence: KeyPresence) -> Result<Cell> {
        let data_key = encode_data_key(token_of(key)?, key);
        let (tree, live_counts) = self.keyspace_tree(ks)?;
        // The newest cell the runs hold for the key competes as if stored;
        // the winner goes to the engine (see `runs`).
        let from_runs = match self.run_set(ks).and_then(|set| set.snapshot()) {
            Some(runs) => runs.get(&data_key)?,
            None => None,
        };
        // `Some(stored)` when a stored cell wins, `None` when `cell` does:
        // it is moved out at the end, never cloned per try.
        let mut outcome = None;
        let mut change = (None, None);
        let mut damage = None;
        let mut keep_the_winner = |stored: Option<&[u8]>| {
            // Overwrites `outcome`, `change` and `damage` on every call: the
            // engine may retry.
            let old = stored.map(StoredCell::of);
            let (kept, damaged) = newest_readable(stored, from_runs.as_deref());
            damage = damaged;
            match kept {
                // As `Cell::reconcile`: the newcomer wins only if greater.
                Some((bytes, kept)) if cell.compare(&kept) != Ordering::Greater => {
                    let bytes = current_format(bytes, &kept);
                    change = (old, Some(StoredCell::of(&bytes)));
                    outcome = Some(kept);
                    Some(bytes)
                }
                _ => {
                    let bytes = cell.encode();
                    change = (old, Some(StoredCell::of(&bytes)));
                    outcome = None;
                    Some(bytes)
                }
            }
        };
        match presence {
            KeyPresence::Unknown => tree.update(&data_key, &mut keep_the_winner)?,
            KeyPresence::LikelyAbsent => {
                tree.update_expecting_absent(&data_key, &mut keep_the_winner)?
            }
        };
        live_size::account(&live_counts, &data_key, change.0, change.1);
        if let Some(error) = damage {
            let doing = "a write replaced it";
            self.inner.damage.note_and_log(ks, Some(key), doing, &error);
        }
        Ok(outcome.unwrap_or(cell))
    }

    /// The data tree of `ks` as readers see it (with its runs laid over
    /// it while it has any), opened on first use. A run sealed after this
    /// is not seen through a tree taken before, as a write made meanwhile
    /// may not be.
    fn data_tree(&self, ks: KeyspaceId) -> Result<Arc<dyn Tree>> {
        let sled = self.keyspace_tree(ks)?.0;
        Ok(match self.run_set(ks) {
            Some(runs) if runs.snapshot().is_some() => Arc::new(ReadThrough { sled, runs }),
            _ => sled,
        })
    }

    /// The runs of `ks`, when the store keeps runs and `ks` has had some.
    fn run_set(&self, ks: KeyspaceId) -> Option<Arc<RunSet>> {
        self.inner.runs.get().and_then(|runs| runs.existing_set(ks))
    }

    /// The data tree of `ks`, opened on first use, and its live bytes.
    fn keyspace_tree(&self, ks: KeyspaceId) -> Result<(Arc<dyn Tree>, LiveCounts)> {
        let mut keyspaces = lock(&self.inner.keyspaces);
        if keyspaces.dropped.contains(&ks) {
            return Err(StorageError::KeyspaceDropped { keyspace: ks });
        }
        let live_counts = Arc::clone(keyspaces.live_counts.entry(ks).or_default());
        if let Some(tree) = keyspaces.open.get(&ks) {
            return Ok((Arc::clone(tree), live_counts));
        }
        let tree = self.inner.engine.open_tree(&ks.data_tree_name())?;
        keyspaces.open.insert(ks, Arc::clone(&tree));
        Ok((tree, live_counts))
    }
}

/// The newest of a stored cell and a run's cell that reads back, with its
/// bytes (the stored one on a tie, as `runs::newer`), and the damage of the
/// first one that does not (`None` if both read back).
pub(crate) fn newest_readable<'a>(
    stored: Option<&'a [u8]>,
    from_run: Option<&'a [u8]>,
) -> (Option<(&'a [u8], Cell)>, Option<StorageError>) {
    let mut damage = None;
    let mut newest: Option<(&[u8], Cell)> = None;
    for bytes in [stored, from_run].into_iter().flatten() {
        match Cell::decode(bytes) {
            Ok(cell) => {
                if newest
                    .as_ref()
                    .is_none_or(|(_, kept)| cell.compare(kept) == Ordering::Greater)
                {
                    newest = Some((bytes, cell));
                }
            }
            Err(reason) => {
                damage.get_or_insert(StorageError::from(reason));
            }
        }
    }
    (newest, damage)
}

/// `bytes`, the encoding of `cell`, in the current format: as they are, or
/// encoded again if they are of the old one (migration by rewrite; see
/// `cell`).
pub(crate) fn current_format(bytes: &[u8], cell: &Cell) -> Vec<u8> {
    if Cell::is_current_format(bytes) {
        bytes.to_vec()
    } else {
        cell.encode()
    }
}

/// The `system` tree's key recording that `ks` was dropped.
fn dropped_key(ks: KeyspaceId) -> String {
    format!("{DROPPED_KEYSPACE_PREFIX}{}", ks.0)
}
