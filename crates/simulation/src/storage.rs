//! One node's real storage stack — `Store` with its commit log, checkpoints,
//! runs and fold — on a simulated disk that crashes, tears, rots and fails,
//! judged against a model of what was acknowledged.
//!
//! # Why a simulation of its own
//! The cluster simulation ([`crate::scenario`]) runs the same stack, but a
//! replica that loses an acknowledged write there is usually healed by
//! hints, read repair and repair before any client notices: replication
//! hides storage bugs. Here one store stands alone, so every acknowledged
//! write it loses, and every wrong byte it returns, is seen; and a seed
//! costs milliseconds, so thousands run in CI's time.
//!
//! # How a seed runs
//! A current-thread tokio runtime on paused time, with blocking work inline
//! ([`ringstore_storage::offload`]): the store's commit log writes and
//! syncs inline (its sync a couple of simulated milliseconds after its
//! write), its checkpointer and fold are tasks. Each *life* of the store:
//! open it on the disk (replaying the log and reading the runs), start a
//! few clients — writes of values, tombstones and expiring cells at random
//! timestamps, reads, and bulk loads sealed as runs — let them run for a
//! random stretch of simulated time, then pull the plug: the runtime is
//! dropped with everything in flight, and the disk crashes (keeping, with
//! a tear, a prefix of the unsynced writes). Some crashes also flip bits in
//! the stored bytes; some lives run with the file system failing writes,
//! or reads, with `EIO`.
//! After the last life the store opens once more and every key is read.
//!
//! # What is checked
//! The model keeps, per key, every cell written and which were
//! acknowledged (an `apply` that returned, a run whose seal returned).
//! - **Nothing acknowledged is lost**: a read (during a life or at the end)
//!   returns a cell at least as new (by `Cell::compare`) as every cell
//!   acknowledged before the read began, unless the disk rotted.
//! - **Nothing is invented**: a read returns a cell some write of that key
//!   wrote, bit for bit, or nothing if nothing acknowledged; never a
//!   damaged value — with rot too. A damaged cell may be reported as an
//!   error (corruption), never returned.
//! - **No failure without a cause**: an operation fails only while the
//!   disk fails writes, after rot (corruption), or when the plug was pulled.
//!
//! # Caveats
//! - Rot loses what it hits: after it, only "nothing is invented" is
//!   checked for the keys it may have hit (all of that disk's keys).
//! - One keyspace, small values; garbage collection (`purge_unchanged`) and
//!   keyspace drops are not exercised here.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_storage::file_system::{FileFaults, IoFault};
use ringstore_storage::{
    Cell, CommitLogOptions, Durability, KeyspaceId, SimulatedDisk, SimulatedFileSystem,
    StorageError, Store, Timestamp,
};

/// Where the store's files are on the simulated file system.
const DATA_DIR: &str = "/node";

/// What one seed did, and what it found.
#[derive(Debug, Default)]
pub struct StorageOutcome {
    /// The seed.
    pub seed: u64,
    /// Lives of the store (each ends in a crash, but the last).
    pub lives: usize,
    /// Crashes that tore unsynced writes.
    pub torn: usize,
    /// Crashes after which bits were flipped.
    pub rotted: usize,
    /// Lives run with the file system failing writes.
    pub failing: usize,
    /// Writes acknowledged (cells applied, and cells in sealed runs).
    pub acknowledged: usize,
    /// Runs sealed.
    pub runs: usize,
    /// Reads checked.
    pub reads: usize,
    /// Reads and writes that failed, excused by the disk's faults.
    pub excused: usize,
    /// Reads that reported corruption.
    pub corrupt: usize,
    /// Every broken promise.
    pub violations: Vec<String>,
}

/// Per key: every cell written, and whether its write was acknowledged.
#[derive(Default)]
struct Model {
    keys: BTreeMap<Vec<u8>, Vec<Written>>,
    /// Set once rot may have hit the disk: losses are excused from then on.
    rotted: bool,
    /// Set while the disk fails writes: failures are excused.
    failing: bool,
    outcome: StorageOutcome,
}

struct Written {
    cell: Cell,
    /// The step at which it was acknowledged, if it was.
    acked_at: Option<u64>,
}

type Shared = Arc<Mutex<(Model, u64)>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, (Model, u64)> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The keyspace every write goes to.
fn keyspace() -> KeyspaceId {
    "00000000-0000-4000-8000-000000000001"
        .parse()
        .expect("a valid keyspace id")
}

fn options() -> CommitLogOptions {
    CommitLogOptions {
        // Small segments, so the log rolls and recycles within a seed.
        segment_bytes: 16 << 10,
        checkpoint_segments: 2,
        checkpoint_interval: Duration::from_millis(300),
        ..CommitLogOptions::new(PathBuf::from(DATA_DIR).join("commitlog"))
    }
}

/// Runs seed `seed`: several lives of one store, then a final read of
/// every key. Panics only on a bug of the simulation itself.
pub fn run(seed: u64) -> StorageOutcome {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x7374_6f72_6167_6521);
    let (disk, files) = (SimulatedDisk::new(), SimulatedFileSystem::new());
    let shared: Shared = Arc::new(Mutex::new((Model::default(), 0)));
    lock(&shared).0.outcome.seed = seed;
    let lives = rng.random_range(4..12);
    std::thread::scope(|scope| {
        // A thread of its own: blocking work runs inline on it.
        scope
            .spawn(|| {
                ringstore_storage::offload::run_inline_on_this_thread();
                for life in 0..=lives {
                    let last = life == lives;
                    let failing = !last && rng.random_bool(0.15);
                    lock(&shared).0.failing = failing;
                    if failing {
                        lock(&shared).0.outcome.failing += 1;
                    }
                    live(&disk, &files, &shared, &mut rng, last, failing);
                    if last {
                        break;
                    }
                    let tear = rng.random_bool(0.5).then(|| rng.random());
                    disk.crash();
                    files.crash(tear);
                    let mut model = lock(&shared);
                    model.0.outcome.lives += 1;
                    model.0.outcome.torn += usize::from(tear.is_some());
                    if rng.random_bool(0.1) {
                        let seed = rng.random();
                        disk.flip_bits(seed, 8, |tree| tree.starts_with("data/"));
                        files.flip_bits(seed, 2048, |_| true);
                        model.0.rotted = true;
                        model.0.outcome.rotted += 1;
                    }
                }
            })
            .join()
            .expect("the simulation thread does not panic");
    });
    let (model, _) = Arc::try_unwrap(shared)
        .ok()
        .expect("every client is gone")
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    model.outcome
}

/// One life: opens the store, runs clients for a while (or, the last
/// time, reads every key), then drops everything at once.
fn live(
    disk: &SimulatedDisk,
    files: &SimulatedFileSystem,
    shared: &Shared,
    rng: &mut StdRng,
    last: bool,
    failing: bool,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let store = runtime.block_on(async {
        Store::open_on_files(
            Arc::new(disk.clone()),
            Durability::Batch,
            options(),
            Some(PathBuf::from(DATA_DIR).join("runs")),
            Arc::new(files.clone()),
        )
    });
    let store = match store {
        Ok(store) => store,
        Err(error) => {
            let mut model = lock(shared);
            if !model.0.rotted {
                model
                    .0
                    .violations_push(format!("the store did not open: {error}"));
            }
            return;
        }
    };
    if last {
        runtime.block_on(final_reads(&store, shared));
        return;
    }
    if failing {
        let fails = if rng.random_bool(0.5) {
            IoFault::Writes
        } else {
            IoFault::Reads
        };
        files.set_faults(FileFaults {
            full: false,
            io_errors: Some(fails),
        });
    }
    for client in 0..4u64 {
        let seed = rng.random();
        runtime.spawn(client_loop(store.clone(), Arc::clone(shared), client, seed));
    }
    let length = Duration::from_millis(rng.random_range(20..600));
    runtime.block_on(async { tokio::time::sleep(length).await });
    // The plug is pulled: every task is dropped where it stands.
    drop(store);
    drop(runtime);
}

impl Model {
    fn violations_push(&mut self, violation: String) {
        self.outcome.violations.push(violation);
    }
}

/// Keys the clients share.
const KEYS: u64 = 16;

fn key_name(i: u64) -> Vec<u8> {
    format!("key{i:02}").into_bytes()
}

/// One client: a loop of writes, reads and bulk loads, recorded in the model.
async fn client_loop(store: Store, shared: Shared, client: u64, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let ks = keyspace();
    let mut n = 0u64;
    loop {
        n += 1;
        let choice = rng.random_range(0..10);
        if choice < 5 {
            let key = key_name(rng.random_range(0..KEYS));
            let clock = lock(&shared).1;
            let cell = new_cell(&mut rng, client, n, clock);
            note_written(&shared, &key, &cell);
            match store.apply(ks, &key, cell.clone()).await {
                Ok(_) => note_acked(&shared, &key, &cell),
                Err(error) => excuse(&shared, "write", &key, &error),
            }
        } else if choice < 9 {
            let key = key_name(rng.random_range(0..KEYS));
            let began = lock(&shared).1;
            let read = store.read(ks, &key);
            check_read(&shared, &key, began, read);
        } else {
            let mut cells: Vec<(Vec<u8>, Cell)> = (0..rng.random_range(1..6))
                .map(|_| {
                    let key = key_name(rng.random_range(0..KEYS));
                    let clock = lock(&shared).1;
                    (key, new_cell(&mut rng, client, n, clock))
                })
                .collect();
            cells.dedup_by(|a, b| a.0 == b.0);
            bulk_load(&store, &shared, ks, cells).await;
        }
        let pause = rng.random_range(0..12);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// A cell unique to `(client, n)`: a value, an expiring value or a
/// tombstone. Its timestamp is mostly the model's step `clock` (so the
/// newest write of a key is usually the last, and losing it shows), and
/// now and then an older one (so writes also arrive out of order).
fn new_cell(rng: &mut StdRng, client: u64, n: u64, clock: u64) -> Cell {
    let clock = clock as i64 + 1;
    let timestamp = Timestamp(if rng.random_bool(0.8) {
        clock
    } else {
        rng.random_range(1..=clock)
    });
    let value = format!("c{client}-n{n}-{}", "v".repeat(rng.random_range(0..40))).into_bytes();
    match rng.random_range(0..10) {
        0 => Cell::tombstone(timestamp),
        1 => Cell::expiring(timestamp, value, 60, Timestamp(timestamp.0 + 10)),
        _ => Cell::live(timestamp, value),
    }
}

/// Writes `cells` as one run and seals it; acknowledged once sealed.
async fn bulk_load(store: &Store, shared: &Shared, ks: KeyspaceId, cells: Vec<(Vec<u8>, Cell)>) {
    for (key, cell) in &cells {
        note_written(shared, key, cell);
    }
    let sealed = async {
        let Some(run) = store.start_run(ks)? else {
            return Ok(false);
        };
        let run = store.append_run(run, cells.clone()).await?;
        store.seal_run(run).await?;
        Ok::<bool, StorageError>(true)
    };
    match sealed.await {
        Ok(true) => {
            lock(shared).0.outcome.runs += 1;
            for (key, cell) in &cells {
                note_acked(shared, key, cell);
            }
        }
        Ok(false) => {}
        Err(error) => excuse(shared, "bulk load", &cells[0].0, &error),
    }
}

/// Records a write about to be made.
fn note_written(shared: &Shared, key: &[u8], cell: &Cell) {
    let mut guard = lock(shared);
    guard.1 += 1;
    guard.0.keys.entry(key.to_vec()).or_default().push(Written {
        cell: cell.clone(),
        acked_at: None,
    });
}

/// Records a write acknowledged.
fn note_acked(shared: &Shared, key: &[u8], cell: &Cell) {
    let mut guard = lock(shared);
    guard.1 += 1;
    let step = guard.1;
    let model = &mut guard.0;
    model.outcome.acknowledged += 1;
    if let Some(written) = model
        .keys
        .get_mut(key)
        .and_then(|cells| cells.iter_mut().rev().find(|w| w.cell == *cell))
    {
        written.acked_at = Some(step);
    }
}

/// Counts a failed operation, or calls it a violation when no fault
/// excuses it.
fn excuse(shared: &Shared, what: &str, key: &[u8], error: &StorageError) {
    let mut guard = lock(shared);
    let model = &mut guard.0;
    let excused = model.failing || (model.rotted && error.is_corruption());
    if excused {
        model.outcome.excused += 1;
    } else {
        let key = String::from_utf8_lossy(key).into_owned();
        model.violations_push(format!(
            "a {what} of {key} failed with no fault to excuse it: {error}"
        ));
    }
}

/// Judges one read of `key`, begun at step `began`.
fn check_read(
    shared: &Shared,
    key: &[u8],
    began: u64,
    read: ringstore_storage::Result<Option<Cell>>,
) {
    let mut guard = lock(shared);
    let model = &mut guard.0;
    model.outcome.reads += 1;
    let name = String::from_utf8_lossy(key).into_owned();
    let read = match read {
        Ok(read) => read,
        Err(error) if error.is_corruption() && model.rotted => {
            model.outcome.corrupt += 1;
            return;
        }
        Err(error) => {
            drop(guard);
            excuse(shared, "read", key, &error);
            return;
        }
    };
    let written = model.keys.get(key).map(Vec::as_slice).unwrap_or_default();
    if let Some(cell) = &read
        && !written.iter().any(|w| w.cell == *cell)
    {
        let problem = format!("a read of {name} returned a cell nobody wrote: {cell:?}");
        model.violations_push(problem);
        return;
    }
    if model.rotted {
        return;
    }
    let newest_acked = written
        .iter()
        .filter(|w| w.acked_at.is_some_and(|at| at < began))
        .map(|w| &w.cell)
        .max_by(|a, b| a.compare(b));
    if let Some(acked) = newest_acked {
        let fresh = read
            .as_ref()
            .is_some_and(|cell| cell.compare(acked) != std::cmp::Ordering::Less);
        if !fresh {
            let problem = format!(
                "a read of {name} returned {read:?}, older than the acknowledged {acked:?}"
            );
            model.violations_push(problem);
        }
    }
}

/// Reads every key once the store has opened for the last time.
async fn final_reads(store: &Store, shared: &Shared) {
    let ks = keyspace();
    let began = {
        let mut guard = lock(shared);
        guard.1 += 1;
        guard.1
    };
    for i in 0..KEYS {
        let key = key_name(i);
        let read = store.read(ks, &key);
        check_read(shared, &key, began, read);
    }
}
