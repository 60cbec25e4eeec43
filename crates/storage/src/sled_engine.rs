//! `SledEngine`: the engine ringstore ships, over sled 0.34.
//!
//! # Design
//! One `sled::Db` per node; each [`Tree`] is a `sled::Tree` (sled's trees
//! share one log and page cache, so [`Engine::flush`] — `Db::flush`, an fsync
//! of the shared log — covers every tree at once). [`Tree::update`] is a
//! compare-and-swap loop, as sled's `update_and_fetch`;
//! [`Tree::update_expecting_absent`] starts that loop from a guess of
//! "absent" instead of a lookup, one walk down the tree per new key instead
//! of two.
//!
//! [`Engine::flush`] is sled's `Db::flush` followed by what that leaves
//! undone: sled writes its log with `sync_file_range`, which neither writes
//! the file's metadata nor flushes the drive's cache, and writes its blob
//! files without any sync. `SledFiles` (`sled_files.rs`) adds the
//! `fdatasync` (or `syncfs` when there are blobs) that makes a flush durable
//! across a power loss, not only across a crash of the process.
//!
//! # Invariants
//! - Writes are durable once a flush that started after them has returned;
//!   until then a crash (including `kill -9` of the process) may lose them.
//! - A flush returns only after `fdatasync`/`syncfs` of what it wrote.
//! - sled's internal default tree (`__sled__default`) is never listed by
//!   [`Engine::tree_names`] and cannot be dropped.
//!
//! # Caveats (sled 0.34 behaviour worth knowing)
//! - sled's memory use is several times `cache_capacity_bytes`: the cache
//!   bound is on its page cache, not on log buffers and in-flight pages.
//! - `update` may run its closure several times under contention, and it
//!   rewrites the key even when the closure returns the current value.
//! - `Tree::len` walks the whole tree.
//! - A handle to a dropped tree fails with sled's `CollectionNotFound`, which
//!   this engine reports as [`StorageError::TreeDropped`]; a sled iterator
//!   would repeat that error forever, so ours ends after it.
//! - sled releases its directory's file lock lazily: its background threads
//!   and deferred (epoch-based) frees keep the file open for a moment after the
//!   last `Db` handle is dropped (sled issues #1234, #1289). Reopening in the
//!   same process — a node restarted in a test — would then fail with "could
//!   not acquire lock", so [`SledEngine::open`] retries that one error for up
//!   to [`LOCK_RETRY_WINDOW`].
//! - sled 0.34 is beta software and its on-disk format is not stable across
//!   sled versions: upgrading sled needs an export and import.
//! - sled writes a bulk load about four times: each insert is logged as a
//!   fragment, its leaf is logged again whole at every split (above 16
//!   entries) and every 10 fragments, and the segment cleaner moves live
//!   data out of mostly dead segments. A joiner applying 253 MiB of 1 KiB
//!   values wrote 0.95–1.0 GiB (`benches/bootstrap.sh` prints the ratio);
//!   neither `segment_size` nor the cache size changes it, and one value
//!   per 256 KiB chunk was still written 3.7 times. Streamed ranges are
//!   therefore kept as runs first (`runs`) and folded in later.
//! - Every flush hands the log buffer's write to sled's I/O thread pool,
//!   which wakes all seven of its idle threads for each job (`notify_all`):
//!   about half of the thread wake-ups of a `QUORUM` put at low load.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{Engine, KvIter, Tree, Updater};
use crate::error::{Result, StorageError};
use crate::sled_files::{FileSync, SledFiles};

/// sled's own tree, which every `Db` has and which ringstore never uses.
const SLED_DEFAULT_TREE: &[u8] = b"__sled__default";

/// How long [`SledEngine::open`] keeps retrying while the directory's lock is
/// held, which is how long we allow sled to finish releasing a database closed
/// in this process. A database held open by another process fails after it.
pub const LOCK_RETRY_WINDOW: Duration = Duration::from_secs(5);

/// The longest pause between two attempts to take the lock.
const LOCK_RETRY_MAX_PAUSE: Duration = Duration::from_millis(50);

/// How to open a [`SledEngine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SledOptions {
    /// The page cache's bound, in bytes. sled's resident memory is typically
    /// several times this (log buffers, in-flight pages), so size it at a
    /// fraction of the memory you give storage.
    pub cache_capacity_bytes: u64,
    /// sled's own background flush period in milliseconds, or `None` to leave
    /// flushing to the caller. Under a [`Store`](crate::Store), which flushes
    /// according to its [`Durability`](crate::Durability), `None` is right:
    /// a second flusher only adds fsyncs.
    pub flush_every_ms: Option<u64>,
}

impl Default for SledOptions {
    /// 256 MiB of cache (expect resident memory several times that under
    /// load); the store flushes.
    fn default() -> SledOptions {
        SledOptions {
            cache_capacity_bytes: 256 << 20,
            flush_every_ms: None,
        }
    }
}

impl SledOptions {
    /// 8 MiB of cache, for tests and tiny nodes; the store flushes.
    pub fn small() -> SledOptions {
        SledOptions {
            cache_capacity_bytes: 8 << 20,
            flush_every_ms: None,
        }
    }
}

/// The sled engine: one sled database in a directory.
#[derive(Clone, Debug)]
pub struct SledEngine {
    db: sled::Db,
    files: Arc<SledFiles>,
}

impl SledEngine {
    /// Opens (or creates) the database in the directory `path`. sled holds a
    /// file lock on it: while another process has it open, this blocks for
    /// [`LOCK_RETRY_WINDOW`] and then fails. (The wait exists for the same
    /// process reopening a database it has just closed; see the module docs.)
    pub fn open(path: impl AsRef<Path>, options: SledOptions) -> Result<SledEngine> {
        let config = sled::Config::new()
            .path(path.as_ref())
            .cache_capacity(options.cache_capacity_bytes)
            .flush_every_ms(options.flush_every_ms);
        let deadline = Instant::now() + LOCK_RETRY_WINDOW;
        let mut pause = Duration::from_millis(1);
        loop {
            match config.open() {
                Ok(db) => {
                    let files = SledFiles::open(path.as_ref()).map_err(StorageError::Disk)?;
                    return Ok(SledEngine {
                        db,
                        files: Arc::new(files),
                    });
                }
                Err(error) if is_lock_held(&error) && Instant::now() < deadline => {
                    tracing::debug!(%error, "sled lock still held; retrying");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(LOCK_RETRY_MAX_PAUSE);
                }
                Err(error) => return Err(from_sled(error)),
            }
        }
    }

    /// sled's flush, then the sync that makes it durable; how it synced.
    pub(crate) fn flush_durably(&self) -> Result<FileSync> {
        self.db.flush().map_err(from_sled)?;
        self.files.sync().map_err(StorageError::Disk)
    }

    /// Whether the database existed before this open (sled's `was_recovered`).
    pub fn was_recovered(&self) -> bool {
        self.db.was_recovered()
    }
}

/// Whether `open` failed because the directory's lock is held. sled reports it
/// only as an `io::Error` of kind `Other` wrapping a message, so we match it.
fn is_lock_held(error: &sled::Error) -> bool {
    matches!(error, sled::Error::Io(io) if io.to_string().contains("could not acquire lock"))
}

/// Converts a sled error, naming a stale tree handle for what it is.
fn from_sled(error: sled::Error) -> StorageError {
    match error {
        sled::Error::CollectionNotFound(name) => StorageError::TreeDropped {
            name: String::from_utf8_lossy(&name).into_owned(),
        },
        other => StorageError::Sled(other),
    }
}

impl Engine for SledEngine {
    fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>> {
        let tree = self.db.open_tree(name).map_err(from_sled)?;
        Ok(Arc::new(SledTree { tree }))
    }

    fn drop_tree(&self, name: &str) -> Result<bool> {
        self.db.drop_tree(name).map_err(from_sled)
    }

    fn tree_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .db
            .tree_names()
            .into_iter()
            .filter(|name| &name[..] != SLED_DEFAULT_TREE)
            .map(|name| String::from_utf8_lossy(&name).into_owned())
            .collect();
        names.sort();
        names
    }

    fn flush(&self) -> Result<()> {
        self.flush_durably().map(drop)
    }

    fn size_on_disk(&self) -> Result<u64> {
        self.db.size_on_disk().map_err(from_sled)
    }
}

/// One sled tree.
struct SledTree {
    tree: sled::Tree,
}

fn to_vec(value: Option<sled::IVec>) -> Option<Vec<u8>> {
    value.map(|v| v.to_vec())
}

impl SledTree {
    /// sled's `update_and_fetch` from a guess of the current value: swaps
    /// `f(guess)` in if the key still holds `guess`, otherwise takes the
    /// value the failed swap reports as the next guess. Each try is one walk
    /// down the tree; `update_and_fetch` adds a lookup before the first.
    fn swap_until_settled(
        &self,
        key: &[u8],
        mut guess: Option<sled::IVec>,
        f: &mut Updater<'_>,
    ) -> Result<Option<Vec<u8>>> {
        loop {
            let next = f(guess.as_deref()).map(sled::IVec::from);
            match self
                .tree
                .compare_and_swap(key, guess.as_ref(), next.clone())
                .map_err(from_sled)?
            {
                Ok(()) => return Ok(to_vec(next)),
                Err(changed) => guess = changed.current,
            }
        }
    }
}

impl Tree for SledTree {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.get(key).map(to_vec).map_err(from_sled)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.insert(key, value).map(to_vec).map_err(from_sled)
    }

    fn remove(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.tree.remove(key).map(to_vec).map_err(from_sled)
    }

    fn update(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        let current = self.tree.get(key).map_err(from_sled)?;
        self.swap_until_settled(key, current, f)
    }

    fn update_expecting_absent(&self, key: &[u8], f: &mut Updater<'_>) -> Result<Option<Vec<u8>>> {
        // The guess costs nothing to check: a compare-and-swap from `None`
        // that fails hands back the current value, as the lookup would have.
        self.swap_until_settled(key, None, f)
    }

    fn range(&self, from: Bound<&[u8]>, to: Bound<&[u8]>) -> KvIter {
        let mut failed = false;
        let iter = self
            .tree
            .range::<&[u8], _>((from, to))
            .map_while(move |entry| {
                if failed {
                    return None;
                }
                failed = entry.is_err();
                Some(
                    entry
                        .map(|(k, v)| (k.to_vec(), v.to_vec()))
                        .map_err(from_sled),
                )
            });
        Box::new(iter)
    }

    fn len(&self) -> Result<usize> {
        self.tree
            .iter()
            .keys()
            .try_fold(0, |count, key| key.map(|_| count + 1))
            .map_err(from_sled)
    }
}
