//! The commit log: how a write in batch durability is acknowledged after one
//! append and one `fdatasync` of a file ringstore owns, instead of a flush of
//! the engine.
//!
//! # Why
//! A sled flush hands its log buffer to sled's I/O thread pool and syncs its
//! files; on a 2-core virtual machine, where waking a thread on the other
//! core costs 15–20 µs of CPU, that hand-off is about half the wake-ups of a
//! `QUORUM` put. Cassandra acknowledges a write once its commit log has it
//! and writes its tables later; ringstore does the same with sled as the
//! table: a write is merged into sled in memory, its winning cell is
//! appended to this log, and it is acknowledged once a dedicated writer
//! thread has synced the log past it. sled is flushed only at checkpoints.
//!
//! # Protocol
//! - **Append.** After a write has been merged into the engine, the cell
//!   that won at its key is appended ([`CommitLog::append`]); the returned
//!   [`LogPosition`] is durable once [`CommitLog::wait`] returns. The
//!   *winner* is logged, not the incoming cell: when the stored cell wins,
//!   the write waits for a record of the stored cell, which may itself not
//!   be durable yet, and a write that lost never reaches the log, so a
//!   replay cannot bring back data a purge has since removed.
//! - **Checkpoint.** Once [`CommitLogOptions::checkpoint_segments`] segments
//!   are full, or [`CommitLogOptions::checkpoint_interval`] after the last
//!   checkpoint if anything was appended since, the store flushes the engine
//!   and then recycles the full segments
//!   ([`CommitLog::closed_segments`], [`CommitLog::recycle`]). A closed
//!   segment's records were all appended, so merged, before the flush
//!   started: the flush covers them.
//! - **Replay.** On open, [`recover`] reads every segment; the store merges
//!   each record into the engine by last-write-wins, flushes the engine, and
//!   only then starts appending, into slots whose old records no longer
//!   count. Replay is idempotent and its order does not matter.
//!
//! # Files, and simulations
//! Segments are read, written and synced through the store's
//! [`FileSystem`](crate::FileSystem), so a simulation can crash, tear and
//! damage them. On a simulation's thread ([`crate::offload`]) there is no
//! writer thread: a waiter writes the batch itself and syncs it
//! [`INLINE_SYNC_TIME`] of simulated time later, so a crash can fall
//! between the write and the sync, as it can on a real disk.
//!
//! # Invariants
//! - A position returned by [`CommitLog::wait`] as durable is on disk: its
//!   bytes were written and `fdatasync`ed, behind a header synced before it.
//! - A record is replayed only if its checksum, seeded with its segment's
//!   nonce, holds; so zeros, a torn tail and the leftovers of a file's
//!   previous use all end a segment (`record.rs`).
//! - The writer syncs each section (sync marker and records) before it
//!   writes the next, so a valid section behind a damaged one proves the
//!   damage hit acknowledged records, and only then is it reported.
//! - A segment is recycled only after an engine flush that started after it
//!   was closed has succeeded.
//! - After the writer fails (a full disk, an I/O error), every waiter and
//!   every later append fails with that error, for good, as sled does.
//!
//! # Caveats
//! - Damage to synced bytes (a bad disk) loses the rest of its section (one
//!   synced batch): replay skips to the next valid sync marker, replays what
//!   follows, and logs the damage as an error naming a repair. Damage in
//!   the last section of a segment looks like a torn tail and is not
//!   reported; neither is damage to a segment's header, which hides the
//!   whole segment as a never-used file would.
//! - A record logged before a purge of its key and replayed after it (a crash
//!   before the next checkpoint) brings the key back: a tombstone, harmless,
//!   or, after `cleanup`, a copy of data this node no longer replicates,
//!   which the next cleanup removes again.
//! - A write waits for the whole sync that covers it, so a slow sync is
//!   every covered write's latency. The benchmark machine's virtual disk
//!   stalls syncs for 10–25 ms once its I/O budget, refilled every 100 ms,
//!   is spent (`benches/disk_sync.sh` shows it without ringstore); with
//!   three nodes on that one disk every replica stalls at once, which a
//!   `QUORUM` of replicas on their own disks would not.
//!   [`CommitLogOptions::sync_window`] trades a little latency for fewer
//!   syncs.
//! - Writes that bypass the log (stream chunks, hints, metadata, purges)
//!   are made durable by engine flushes, as without a log.
//! - A replayed record of a keyspace dropped since is skipped only if the
//!   drop was recorded durably (the store records drops in its `system`
//!   tree).

mod record;
mod segment;
mod writer;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::{Result, StorageError};
use crate::file_system::FileSystem;
use crate::group_commit::SyncObserver;
use ringstore_cell::Cell;
use ringstore_cell::KeyspaceId;

pub(crate) use record::LogRecord;
use record::{SegmentHeader, decode_records, encode_record};
use segment::{Slot, list_slots};
use writer::Active;

/// Where and how a store keeps its commit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitLogOptions {
    /// The log's own directory (created if missing).
    pub dir: PathBuf,
    /// The size of a segment file. Records never span segments; a record
    /// longer than this gets a longer segment of its own.
    pub segment_bytes: u64,
    /// How many full segments trigger a checkpoint (an engine flush, after
    /// which they are reused): the bound on what a replay reads after a
    /// crash is about one more than this.
    pub checkpoint_segments: usize,
    /// The longest time between checkpoints while writes arrive. Besides
    /// bounding how stale the engine's files get, this is how soon a failing
    /// disk is noticed: the log writes into space it reserved, so a full disk
    /// shows first in the engine's flush.
    pub checkpoint_interval: Duration,
    /// The shortest time between the starts of two log syncs (0: sync as
    /// soon as the previous sync ends). A window makes fewer, larger syncs:
    /// each write waits up to the window for its batch, in exchange for
    /// fewer I/O operations on a disk that stalls when they exceed its
    /// budget (see the writer's "Sync window").
    pub sync_window: Duration,
}

impl CommitLogOptions {
    /// 8 MiB segments, a checkpoint every 2 full ones or every second while
    /// writes arrive, no sync window, in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> CommitLogOptions {
        CommitLogOptions {
            dir: dir.into(),
            segment_bytes: 8 << 20,
            checkpoint_segments: 2,
            checkpoint_interval: Duration::from_secs(1),
            sync_window: Duration::ZERO,
        }
    }
}

/// How long a log kept inline (a simulation) takes to sync a batch, in the
/// simulation's time: the writes are made, then the sync comes this much
/// later, so a crash can fall between them and find the batch unsynced (and
/// torn), as it can between a real `write` and `fdatasync`.
pub(crate) const INLINE_SYNC_TIME: Duration = Duration::from_millis(2);

/// How many emptied segment files are kept for reuse; more are deleted.
const MAX_FREE_SLOTS: usize = 4;

/// A place in the log: the bytes appended before it, over the log's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LogPosition(u64);

/// What [`recover`] found in the log's directory.
pub(crate) struct Recovered {
    /// Every valid record of every segment.
    pub(crate) records: Vec<LogRecord>,
    /// Records whose checksum held but whose payload did not decode.
    pub(crate) undecodable: usize,
    /// Damaged places in synced sections (`record.rs`, "Why sync markers").
    pub(crate) damaged: usize,
    slots: Vec<Slot>,
    next_sequence: u64,
}

impl Recovered {
    /// Empties every recovered segment, once its records are merged into
    /// the engine and flushed; the slots, free for reuse.
    pub(crate) fn retire(self) -> Result<Vec<Slot>> {
        for slot in &self.slots {
            slot.retire().map_err(|e| disk(&slot.path, e))?;
        }
        Ok(self.slots)
    }
}

/// Reads every segment of the log in `options.dir` on `files` (creating
/// the directory if it is missing).
pub(crate) fn recover(options: &CommitLogOptions, files: &dyn FileSystem) -> Result<Recovered> {
    let dir = &options.dir;
    files.create_dir_all(dir).map_err(|e| disk(dir, e))?;
    let mut recovered = Recovered {
        records: Vec::new(),
        undecodable: 0,
        damaged: 0,
        slots: Vec::new(),
        next_sequence: 1,
    };
    for number in list_slots(files, dir).map_err(|e| disk(dir, e))? {
        let slot = Slot::open(files, dir, number).map_err(|e| disk(dir, e))?;
        let header = slot.read_header().map_err(|e| disk(&slot.path, e))?;
        if let Some(header) = SegmentHeader::decode(&header) {
            let bytes = slot.read_all().map_err(|e| disk(&slot.path, e))?;
            let found = decode_records(&bytes, &header);
            tracing::info!(
                segment = %slot.path.display(),
                records = found.records.len(),
                bytes = found.end,
                "replaying commit log segment"
            );
            if found.damaged > 0 {
                tracing::error!(
                    segment = %slot.path.display(),
                    damaged = found.damaged,
                    "commit log segment damaged: synced records no longer read back \
                     and were skipped; the records behind them were replayed. \
                     Acknowledged writes may be missing here: run a repair"
                );
            }
            recovered.records.extend(found.records);
            recovered.undecodable += found.undecodable;
            recovered.damaged += found.damaged;
            recovered.next_sequence = recovered.next_sequence.max(header.sequence + 1);
        }
        recovered.slots.push(slot);
    }
    Ok(recovered)
}

fn disk(path: &Path, error: io::Error) -> StorageError {
    StorageError::Disk(io::Error::new(
        error.kind(),
        format!("commit log {}: {error}", path.display()),
    ))
}

/// The running log: append, wait, checkpoint. Dropping it stops the writer
/// thread once it has written everything appended.
pub(crate) struct CommitLog {
    shared: Arc<Shared>,
    /// On a deterministic simulation's thread ([`crate::offload`]) there is
    /// no writer thread: the active segment is kept here, and a waiter
    /// writes and syncs what was appended itself, in the simulation's order
    /// (see [`INLINE_SYNC_TIME`]). A tokio mutex: it is held across the
    /// simulated sync's wait, so one waiter writes at a time, as the
    /// thread would.
    inline: Option<tokio::sync::Mutex<Active>>,
}

/// What the writer thread shares with appenders, waiters and the
/// checkpointer.
struct Shared {
    options: CommitLogOptions,
    /// Where the segment files are.
    files: Arc<dyn FileSystem>,
    state: Mutex<State>,
    /// Wakes the writer thread when it sleeps and something was appended.
    wake: Condvar,
    /// The durable position and the failure, if any; waiters watch it.
    progress: watch::Sender<Progress>,
    /// How many segments are closed and not yet recycled.
    full_segments: watch::Sender<usize>,
    /// Told how long each batch's write and sync took (metrics), once set.
    observer: OnceLock<SyncObserver>,
}

#[derive(Clone, Debug, Default)]
struct Progress {
    durable: u64,
    failure: Option<Arc<StorageError>>,
}

/// Guarded by [`Shared::state`].
struct State {
    /// Records appended and not yet taken by the writer.
    buffer: Vec<u8>,
    /// The end of the last record appended ([`LogPosition`]).
    appended: u64,
    /// Whether the writer thread sleeps on [`Shared::wake`].
    writer_idle: bool,
    /// Set once: the writer drains the buffer and exits.
    stopping: bool,
    /// The failure that stopped the writer.
    failure: Option<Arc<StorageError>>,
    /// Full segments, oldest first, whose records the engine may not have
    /// flushed yet.
    closed: Vec<Slot>,
    /// Emptied segment files, ready for reuse.
    free: Vec<Slot>,
    /// The highest slot number in use.
    highest_slot: u32,
    /// Whether a spare segment file is being created in the background.
    preparing_spare: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Critical sections move buffers and slots; a panic leaves them whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Fails the log for good with `error`.
    fn fail(&self, error: io::Error) {
        tracing::error!(%error, "commit log write failed; writes in batch durability fail from now on");
        let failure = Arc::new(disk(&self.options.dir, error));
        self.lock().failure = Some(Arc::clone(&failure));
        self.progress
            .send_modify(|progress| progress.failure = Some(failure));
    }
}

impl CommitLog {
    /// Starts the log after [`recover`] (whose records the caller has
    /// merged into the engine and flushed): every recovered slot is
    /// emptied, the first becomes the active segment.
    pub(crate) fn start(
        options: CommitLogOptions,
        recovered: Recovered,
        files: Arc<dyn FileSystem>,
    ) -> Result<CommitLog> {
        let dir = options.dir.clone();
        let next_sequence = recovered.next_sequence;
        let mut free = recovered.retire()?;
        let highest_slot = free.iter().map(|slot| slot.number).max().unwrap_or(0);
        let first = match free.pop() {
            Some(slot) => slot,
            None => Slot::create(files.as_ref(), &dir, 1, options.segment_bytes)
                .map_err(|e| disk(&dir, e))?,
        };
        let first_number = first.number;
        let active = Active::begin(first, next_sequence).map_err(|e| disk(&dir, e))?;
        let shared = Arc::new(Shared {
            options,
            files,
            state: Mutex::new(State {
                buffer: Vec::new(),
                appended: 0,
                writer_idle: false,
                stopping: false,
                failure: None,
                closed: Vec::new(),
                free,
                highest_slot: highest_slot.max(first_number),
                preparing_spare: false,
            }),
            wake: Condvar::new(),
            progress: watch::channel(Progress::default()).0,
            full_segments: watch::channel(0).0,
            observer: OnceLock::new(),
        });
        if crate::offload::runs_inline() {
            return Ok(CommitLog {
                shared,
                inline: Some(tokio::sync::Mutex::new(active)),
            });
        }
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("commit-log".into())
            .spawn(move || writer::run(thread_shared, active))
            .map_err(|e| disk(&dir, e))?;
        Ok(CommitLog {
            shared,
            inline: None,
        })
    }

    /// Appends the record of `cell` winning at `key` of `ks`; durable once
    /// [`CommitLog::wait`] for the returned position returns.
    pub(crate) fn append(&self, ks: KeyspaceId, key: &[u8], cell: &Cell) -> Result<LogPosition> {
        let mut state = self.shared.lock();
        if let Some(failure) = &state.failure {
            return Err(StorageError::FlushFailed {
                source: Arc::clone(failure),
            });
        }
        let before = state.buffer.len();
        encode_record(&mut state.buffer, ks, key, cell);
        state.appended += (state.buffer.len() - before) as u64;
        if state.writer_idle {
            state.writer_idle = false;
            self.shared.wake.notify_one();
        }
        Ok(LogPosition(state.appended))
    }

    /// Waits until `position` is durable, or the log has failed.
    pub(crate) async fn wait(&self, position: LogPosition) -> Result<()> {
        let mut progress = self.shared.progress.subscribe();
        loop {
            {
                let now = progress.borrow_and_update();
                if now.durable >= position.0 {
                    return Ok(());
                }
                if let Some(failure) = &now.failure {
                    return Err(StorageError::FlushFailed {
                        source: Arc::clone(failure),
                    });
                }
            }
            // The sender lives in `shared`, which `self` holds.
            let Some(active) = &self.inline else {
                let _ = progress.changed().await;
                continue;
            };
            // Kept inline: wait for the waiter that is writing a batch
            // (which may hold `position`) to announce it, or write what
            // was appended ourselves once it is done. `biased`: the
            // simulation's order must not depend on a random pick.
            tokio::select! {
                biased;
                _ = progress.changed() => {}
                mut active = active.lock() => {
                    if self.shared.progress.borrow().durable < position.0 {
                        writer::write_appended(&self.shared, &mut active).await;
                    }
                }
            }
        }
    }

    /// Sets the observer told how long each batch's write and sync took;
    /// only the first call sets it. Whether this one did.
    pub(crate) fn observe(&self, observer: SyncObserver) -> bool {
        self.shared.observer.set(observer).is_ok()
    }

    /// The position after the last record appended so far.
    pub(crate) fn appended(&self) -> LogPosition {
        LogPosition(self.shared.lock().appended)
    }

    /// Watches how many segments are full and not yet recycled.
    pub(crate) fn full_segments(&self) -> watch::Receiver<usize> {
        self.shared.full_segments.subscribe()
    }

    /// The slot numbers of the full segments, for a checkpoint to recycle
    /// after its engine flush.
    pub(crate) fn closed_segments(&self) -> Vec<u32> {
        self.shared
            .lock()
            .closed
            .iter()
            .map(|slot| slot.number)
            .collect()
    }

    /// Recycles the full segments `numbers`, which an engine flush that
    /// started after they were closed has covered.
    pub(crate) fn recycle(&self, numbers: &[u32]) {
        let (retired, full) = {
            let mut state = self.shared.lock();
            let (retired, kept): (Vec<Slot>, Vec<Slot>) = std::mem::take(&mut state.closed)
                .into_iter()
                .partition(|slot| numbers.contains(&slot.number));
            state.closed = kept;
            (retired, state.closed.len())
        };
        self.shared.full_segments.send_replace(full);
        for slot in retired {
            if let Err(error) = slot.retire() {
                tracing::warn!(%error, segment = %slot.path.display(), "could not empty a commit log segment");
            }
            let mut state = self.shared.lock();
            if state.free.len() < MAX_FREE_SLOTS {
                state.free.push(slot);
            } else {
                drop(state);
                if let Err(error) = self.shared.files.remove_file(&slot.path) {
                    tracing::warn!(%error, segment = %slot.path.display(), "could not delete a commit log segment");
                }
            }
        }
    }

    /// Stops the writer once everything appended is durable, and waits for
    /// that. Appending afterwards is a bug.
    pub(crate) async fn stop(&self) -> Result<()> {
        let end = {
            let mut state = self.shared.lock();
            state.stopping = true;
            self.shared.wake.notify_one();
            LogPosition(state.appended)
        };
        self.wait(end).await
    }
}

impl CommitLog {
    /// Empties every segment file, after [`CommitLog::stop`] and an engine
    /// flush that followed it (a clean shutdown): the next open has nothing
    /// to replay. A file that cannot be emptied is only replayed again.
    pub(crate) fn retire_all(&self) {
        let (dir, files) = (&self.shared.options.dir, self.shared.files.as_ref());
        let slots = list_slots(files, dir).unwrap_or_default();
        for number in slots {
            if let Err(error) = Slot::open(files, dir, number).and_then(|slot| slot.retire()) {
                tracing::warn!(%error, slot = number, "could not empty a commit log segment");
            }
        }
    }
}

impl Drop for CommitLog {
    fn drop(&mut self) {
        self.shared.lock().stopping = true;
        self.shared.wake.notify_one();
    }
}
