//! The commit log through the store: in batch durability, a write is
//! acknowledged once the log has it, the engine is flushed only at
//! checkpoints, and after a crash that loses every unflushed engine write
//! the replay brings back every acknowledged one.
//!
//! The engine is a `SimulatedDisk`, whose `crash` throws away what was not
//! flushed, as `kill -9` does to sled; the log is real files in a temporary
//! directory. A crash here drops the store without closing it (its writer
//! thread may still drain what was appended, which a real crash would not
//! do; what was acknowledged was synced before, so it does not matter).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ringstore_storage::{
    Cell, CommitLogOptions, Durability, KeyspaceId, SimulatedDisk, SimulatedFileSystem, Store,
    Timestamp,
};

const WRITERS: usize = 8;
const KEYS_PER_WRITER: usize = 40;
const VERSIONS: usize = 6;

/// The log in `dir`, with no checkpoint by time during a test.
fn options(dir: &Path) -> CommitLogOptions {
    CommitLogOptions {
        checkpoint_interval: Duration::from_secs(3600),
        ..CommitLogOptions::new(dir.join("commitlog"))
    }
}

fn open(disk: &SimulatedDisk, log: &CommitLogOptions) -> Store {
    Store::open_with_commit_log(Arc::new(disk.clone()), Durability::Batch, log.clone()).unwrap()
}

/// A value that names its key and version, so a stale copy shows.
fn value(writer: usize, key: usize, version: usize) -> Vec<u8> {
    format!("w{writer}-k{key}-v{version}").into_bytes()
}

fn key(writer: usize, key: usize) -> Vec<u8> {
    format!("writer{writer}/key{key}").into_bytes()
}

/// Counts the engine flushes a store runs from now on.
fn count_flushes(store: &Store) -> Arc<AtomicUsize> {
    let flushes = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&flushes);
    assert!(store.observe_syncs(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    flushes
}

/// `WRITERS` tasks write every key `VERSIONS` times, each version with a
/// higher timestamp, interleaved; the last acknowledged value of each key.
async fn write_versions(store: &Store, ks: KeyspaceId) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut acked = BTreeMap::new();
                for version in 0..VERSIONS {
                    for k in 0..KEYS_PER_WRITER {
                        let cell =
                            Cell::live(Timestamp(1 + version as i64), value(writer, k, version));
                        store.apply(ks, &key(writer, k), cell).await.unwrap();
                        acked.insert(key(writer, k), value(writer, k, version));
                    }
                }
                acked
            })
        })
        .collect();
    let mut acked = BTreeMap::new();
    for task in tasks {
        acked.extend(task.await.unwrap());
    }
    acked
}

fn stored_value(store: &Store, ks: KeyspaceId, key: &[u8]) -> Option<Vec<u8>> {
    store.read(ks, key).unwrap().and_then(|cell| cell.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_an_engine_crash_through_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, log) = (SimulatedDisk::new(), options(dir.path()));
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    let flushes = count_flushes(&store);
    let acked = write_versions(&store, ks).await;
    assert_eq!(acked.len(), WRITERS * KEYS_PER_WRITER);
    assert_eq!(
        flushes.load(Ordering::SeqCst),
        0,
        "the log acknowledged {} writes without one engine flush",
        WRITERS * KEYS_PER_WRITER * VERSIONS
    );
    drop(store);
    disk.crash();

    // Without the log, the crash lost the writes: the replay is what brings them back.
    let bare = Store::open(Arc::new(disk.clone()), Durability::Batch).unwrap();
    let survived = acked
        .keys()
        .filter(|k| stored_value(&bare, ks, k).is_some())
        .count();
    assert_eq!(
        survived, 0,
        "the engine kept writes it was never asked to flush"
    );
    drop(bare);

    let store = open(&disk, &log);
    assert_eq!(store.commit_log_damage(), 0, "a crash is not damage");
    assert_holds_every_acknowledged_value(&store, ks, &acked);
    // The replay was flushed: a second crash loses nothing either.
    drop(store);
    disk.crash();
    let store = Store::open(Arc::new(disk.clone()), Durability::Batch).unwrap();
    assert_holds_every_acknowledged_value(&store, ks, &acked);
}

/// Checks that `store` holds, for every key of `acked`, exactly its last
/// acknowledged value.
fn assert_holds_every_acknowledged_value(
    store: &Store,
    ks: KeyspaceId,
    acked: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    for (key, expected) in acked {
        assert_eq!(
            stored_value(store, ks, key).as_ref(),
            Some(expected),
            "key {}",
            String::from_utf8_lossy(key)
        );
    }
}

/// A byte of a synced record damaged in the middle of a segment (a bad
/// disk) loses that record's batch only: every acknowledged write synced
/// after it is still replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_in_the_middle_of_a_segment_loses_only_its_own_batch() {
    const KEYS: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let (disk, log) = (SimulatedDisk::new(), options(dir.path()));
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    // One write at a time: each is a batch of its own, synced alone.
    for k in 0..KEYS {
        let cell = Cell::live(Timestamp(1), value(0, k, 1));
        store.apply(ks, &key(0, k), cell).await.unwrap();
    }
    drop(store);
    disk.crash();

    // The first record's key, in the first segment, now reads back wrong.
    let path = log.dir.join("segment-000001.log");
    let mut bytes = std::fs::read(&path).unwrap();
    let first = key(0, 0);
    let at = bytes
        .windows(first.len())
        .position(|window| window == first.as_slice())
        .expect("the first write is in the first segment");
    bytes[at] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();

    let store = open(&disk, &log);
    assert_eq!(store.commit_log_damage(), 1, "the damage is counted");
    assert_eq!(stored_value(&store, ks, &first), None, "the damaged write");
    let lost: Vec<usize> = (1..KEYS)
        .filter(|&k| stored_value(&store, ks, &key(0, k)) != Some(value(0, k, 1)))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged writes behind the damage were lost: keys {lost:?}"
    );
}

/// Segment files in the log's directory, and how many of them have a header.
fn segments(log: &CommitLogOptions) -> (usize, usize) {
    let mut files = 0;
    let mut live = 0;
    for entry in std::fs::read_dir(&log.dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        files += 1;
        live += usize::from(bytes.starts_with(b"RSCLOG02"));
    }
    (files, live)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoints_flush_the_engine_and_reuse_segments() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimulatedDisk::new();
    let log = CommitLogOptions {
        segment_bytes: 4096,
        checkpoint_segments: 2,
        ..options(dir.path())
    };
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    let flushes = count_flushes(&store);
    let acked = write_versions(&store, ks).await;
    // ~2,000 records of ~60 bytes in 4 KiB segments: about 30 segments' worth.
    eventually("five checkpoints ran", || {
        flushes.load(Ordering::SeqCst) >= 5
    })
    .await;
    let (files, _) = segments(&log);
    assert!(
        files <= 2 + 1 + 4 + 1,
        "{files} segment files: they are not reused"
    );

    drop(store);
    disk.crash();
    let store = open(&disk, &log);
    assert_holds_every_acknowledged_value(&store, ks, &acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_keyspace_stays_dropped_after_a_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, log) = (SimulatedDisk::new(), options(dir.path()));
    let (dropped, kept) = (KeyspaceId::random(), KeyspaceId::random());
    let store = open(&disk, &log);
    for i in 0..20 {
        let cell = Cell::live(Timestamp(1), value(0, i, 0));
        store
            .apply(dropped, &key(0, i), cell.clone())
            .await
            .unwrap();
        store.apply(kept, &key(0, i), cell).await.unwrap();
    }
    assert!(store.drop_keyspace(dropped).await.unwrap());
    drop(store);
    disk.crash();

    let store = open(&disk, &log);
    assert_eq!(
        store.stored_keyspaces(),
        vec![kept],
        "the replay must not re-create the dropped keyspace"
    );
    assert_eq!(stored_value(&store, kept, &key(0, 7)), Some(value(0, 7, 0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_close_leaves_nothing_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, log) = (SimulatedDisk::new(), options(dir.path()));
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    let acked = write_versions(&store, ks).await;
    assert_eq!(segments(&log).1, 1, "one active segment");
    store.close().await.unwrap();
    assert_eq!(
        segments(&log).1,
        0,
        "closing flushed the engine and emptied the log"
    );
    drop(store);
    disk.crash();
    let store = Store::open(Arc::new(disk.clone()), Durability::Batch).unwrap();
    assert_holds_every_acknowledged_value(&store, ks, &acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_store_replays_what_a_batch_run_left_and_then_logs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (disk, log) = (SimulatedDisk::new(), options(dir.path()));
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    let acked = write_versions(&store, ks).await;
    drop(store);
    disk.crash();

    let periodic = Durability::Periodic {
        interval: Duration::from_secs(3600),
    };
    let store = Store::open_with_commit_log(Arc::new(disk.clone()), periodic, log.clone()).unwrap();
    assert_holds_every_acknowledged_value(&store, ks, &acked);
    store
        .apply(ks, b"after", Cell::live(Timestamp(9), b"x".to_vec()))
        .await
        .unwrap();
    assert_eq!(segments(&log).1, 0, "periodic durability writes no log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_loses_waits_for_the_winner_to_be_logged() {
    // The stored cell wins: the write is acknowledged only once a record of
    // the winner is durable, so a replay restores the winner, never
    // something older.
    let dir = tempfile::tempdir().unwrap();
    let (disk, log) = (SimulatedDisk::new(), options(dir.path()));
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    let newer = Cell::live(Timestamp(10), b"newer".to_vec());
    let older = Cell::live(Timestamp(5), b"older".to_vec());
    store.apply(ks, b"k", newer.clone()).await.unwrap();
    assert_eq!(store.apply(ks, b"k", older).await.unwrap(), newer);
    drop(store);
    disk.crash();
    let store = open(&disk, &log);
    assert_eq!(store.read(ks, b"k").unwrap(), Some(newer));
}

/// Polls `done` every few milliseconds until it holds, failing after 20 s.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_follows_writes_within_the_interval_and_none_runs_without_writes() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimulatedDisk::new();
    let log = CommitLogOptions {
        checkpoint_interval: Duration::from_millis(50),
        ..options(dir.path())
    };
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    let flushes = count_flushes(&store);
    store
        .apply(ks, b"k", Cell::live(Timestamp(1), b"v".to_vec()))
        .await
        .unwrap();
    eventually("a checkpoint flushed the engine", || {
        flushes.load(Ordering::SeqCst) >= 1
    })
    .await;
    // Idle: no more checkpoints (ten intervals).
    let after = flushes.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        flushes.load(Ordering::SeqCst),
        after,
        "an idle log needs no checkpoint"
    );
    // The checkpoint made the write durable in the engine itself.
    drop(store);
    disk.crash();
    let bare = Store::open(Arc::new(disk.clone()), Durability::Batch).unwrap();
    assert_eq!(stored_value(&bare, ks, b"k"), Some(b"v".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_write_fails_its_writes_and_every_later_one_and_is_announced() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimulatedDisk::new();
    // Small segments and no recycling: the log soon needs a new file.
    let log = CommitLogOptions {
        segment_bytes: 4096,
        checkpoint_segments: 1000,
        ..options(dir.path())
    };
    let ks = KeyspaceId::random();
    let store = open(&disk, &log);
    let failure = store.failure();
    store
        .apply(ks, b"before", Cell::live(Timestamp(1), b"v".to_vec()))
        .await
        .unwrap();
    // The directory goes away: creating the next segment fails.
    std::fs::remove_dir_all(&log.dir).unwrap();
    let mut acknowledged = 0;
    let writes = async {
        loop {
            let cell = Cell::live(Timestamp(2), vec![b'x'; 100]);
            let key = format!("k{acknowledged}");
            match store.apply(ks, key.as_bytes(), cell).await {
                Ok(_) => acknowledged += 1,
                Err(error) => break error,
            }
            assert!(
                acknowledged < 1000,
                "4 KiB segments must have rolled by now"
            );
        }
    };
    let error = tokio::time::timeout(Duration::from_secs(30), writes)
        .await
        .expect("a write waiting for a failed log must fail, not hang");
    assert!(
        matches!(error, ringstore_storage::StorageError::FlushFailed { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("commit log"), "{error}");
    let announced = failure.borrow().clone().expect("the failure is announced");
    assert!(announced.to_string().contains("commit log"), "{announced}");
    let later = store
        .apply(ks, b"later", Cell::live(Timestamp(3), b"v".to_vec()))
        .await
        .expect_err("the log has failed for good");
    assert!(
        matches!(later, ringstore_storage::StorageError::FlushFailed { .. }),
        "{later:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spare_segment_is_made_once_the_active_one_is_half_full() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLogOptions {
        segment_bytes: 4096,
        ..options(dir.path())
    };
    let (disk, ks) = (SimulatedDisk::new(), KeyspaceId::random());
    let store = open(&disk, &log);
    let write = |i: usize| {
        let store = store.clone();
        async move {
            let cell = Cell::live(Timestamp(1), value(0, i, 0));
            store.apply(ks, &key(0, i), cell).await.unwrap();
        }
    };
    // Records of ~60 bytes: 10 leave the 4 KiB segment under half full.
    for i in 0..10 {
        write(i).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        segments(&log).0,
        1,
        "a spare before the segment is half full"
    );
    // 40 records in all: past half full, not yet full.
    for i in 10..40 {
        write(i).await;
    }
    eventually("a spare segment was created", || segments(&log).0 == 2).await;
    // 110 in all: the roll takes the spare, and once the new active
    // segment is half full another spare is made.
    for i in 40..110 {
        write(i).await;
    }
    eventually("a closed, an active and a spare segment", || {
        segments(&log).0 == 3
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_window_spaces_the_log_syncs_and_loses_nothing() {
    const WINDOW: Duration = Duration::from_millis(40);
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLogOptions {
        sync_window: WINDOW,
        ..options(dir.path())
    };
    let (disk, ks) = (SimulatedDisk::new(), KeyspaceId::random());
    let store = open(&disk, &log);
    let syncs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&syncs);
    assert!(store.observe_log_syncs(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    // 8 writers, each waiting for every write: without the window each
    // round of writes would get a sync of its own in about a millisecond.
    let started = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                for version in 0..6 {
                    let cell = Cell::live(Timestamp(1 + version as i64), value(writer, 0, version));
                    store.apply(ks, &key(writer, 0), cell).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let syncs = syncs.load(Ordering::SeqCst);
    // Syncs start at least a window apart.
    let most = (elapsed.as_secs_f64() / WINDOW.as_secs_f64()).floor() as usize + 1;
    assert!(
        syncs <= most,
        "{syncs} log syncs in {elapsed:?}: more than one per {WINDOW:?}"
    );
    assert!(syncs >= 6, "{syncs} syncs for 6 rounds of waited writes");

    drop(store);
    disk.crash();
    let store = open(&disk, &log);
    for writer in 0..8 {
        assert_eq!(
            stored_value(&store, ks, &key(writer, 0)),
            Some(value(writer, 0, 5)),
            "writer {writer}'s last acknowledged version"
        );
    }
}

/// On a simulation's thread the log has no writer thread: the waiter that
/// takes the appended records writes them, then syncs them a moment later
/// (`INLINE_SYNC_TIME`, 2 ms). A waiter dropped in that moment (its request
/// timed out) must leave the sync to the next one: here `dropped` takes
/// both its record and `waiting`'s, is dropped before its sync, and
/// `waiting` must still become durable. It spun forever once (found by
/// seed 1288 of the simulation soak), so the runtime runs on a thread of
/// its own and the test gives up on it after a deadline.
#[test]
fn a_waiter_dropped_between_its_write_and_its_sync_leaves_the_sync_to_the_next() {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        ringstore_storage::offload::run_inline_on_this_thread();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let result = runtime.block_on(async {
            let dir = Path::new("/sim");
            let store = Arc::new(
                Store::open_on_files(
                    Arc::new(SimulatedDisk::new()),
                    Durability::Batch,
                    options(dir),
                    None,
                    Arc::new(SimulatedFileSystem::new()),
                )
                .unwrap(),
            );
            let ks = KeyspaceId::random();
            let write = |name: &'static str| {
                let store = Arc::clone(&store);
                async move {
                    let cell = Cell::live(Timestamp(1), name.as_bytes().to_vec());
                    store.apply(ks, name.as_bytes(), cell).await
                }
            };
            // `first` takes the log's writing turn and syncs at 2 ms;
            // meanwhile `dropped` and `waiting` append. One of them takes
            // both records at 2 ms (which one depends on the order they
            // are woken in, so both orders are tried): when it is
            // `dropped`, its timeout drops it at 3 ms, before its sync at
            // 4 ms.
            for dropped_first in [true, false] {
                let first = tokio::spawn(write("first"));
                tokio::task::yield_now().await;
                let spawn_dropped = || {
                    tokio::spawn(tokio::time::timeout(
                        Duration::from_millis(3),
                        write("dropped"),
                    ))
                };
                let (dropped, waiting) = if dropped_first {
                    let dropped = spawn_dropped();
                    tokio::task::yield_now().await;
                    (dropped, tokio::spawn(write("waiting")))
                } else {
                    let waiting = tokio::spawn(write("waiting"));
                    tokio::task::yield_now().await;
                    (spawn_dropped(), waiting)
                };
                first.await.unwrap()?;
                let _ = dropped.await.unwrap();
                waiting.await.unwrap()?;
            }
            Ok::<(), ringstore_storage::StorageError>(())
        });
        let _ = done.send(result);
    });
    let result = outcome
        .recv_timeout(Duration::from_secs(60))
        .expect("the waiter left behind finishes (it spins when the dropped waiter's batch is never synced)");
    result.unwrap();
}
