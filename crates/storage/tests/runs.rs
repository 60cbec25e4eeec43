//! Runs through the store: cells of a bulk load written as a sorted file
//! beside the engine (`Store::start_run`), read and merged as if stored
//! until a background thread folds them into the engine.
//!
//! The fold waits while any run is being written, so a test that wants to
//! look at unfolded runs keeps one run open (`hold_the_fold`). Every wait
//! for the fold polls with a deadline.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_placement::{Token, TokenRange};
use ringstore_storage::{
    Cell, CommitLogOptions, Durability, KeyspaceId, RunIngest, SimulatedDisk, Store, Timestamp,
};

fn open(disk: &SimulatedDisk, dir: &Path) -> Store {
    let log = CommitLogOptions::new(dir.join("commitlog"));
    Store::open_on_disk(
        Arc::new(disk.clone()),
        Durability::Batch,
        log,
        Some(dir.join("runs")),
    )
    .unwrap()
}

fn live(ts: i64, value: &str) -> Cell {
    Cell::live(Timestamp(ts), value.as_bytes().to_vec())
}

/// An open, empty run: the fold waits until it is dropped.
fn hold_the_fold(store: &Store, ks: KeyspaceId) -> RunIngest {
    store.start_run(ks).unwrap().expect("the store keeps runs")
}

/// Cells in `(token, key)` order, as a stream sends them.
fn in_token_order(mut cells: Vec<(Vec<u8>, Cell)>) -> Vec<(Vec<u8>, Cell)> {
    cells.sort_by_key(|(key, _)| {
        (
            ringstore_placement::Murmur3Partitioner::token(key).unwrap(),
            key.clone(),
        )
    });
    cells
}

async fn ingest(store: &Store, ks: KeyspaceId, cells: Vec<(Vec<u8>, Cell)>) {
    let run = store.start_run(ks).unwrap().unwrap();
    let run = store.append_run(run, in_token_order(cells)).await.unwrap();
    store.seal_run(run).await.unwrap();
}

async fn wait_for_the_fold(store: &Store) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.runs_pending() != (0, 0) {
        assert!(
            Instant::now() < deadline,
            "runs not folded: {:?}",
            store.runs_pending()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn whole_ring() -> TokenRange {
    TokenRange::new(Token(0), Token(0))
}

fn scanned(store: &Store, ks: KeyspaceId) -> Vec<(Vec<u8>, Cell)> {
    store
        .scan(ks, whole_ring())
        .unwrap()
        .map(|entry| entry.map(|(_, key, cell)| (key, cell)).unwrap())
        .collect()
}

fn run_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for ks in std::fs::read_dir(dir.join("runs")).unwrap() {
        for file in std::fs::read_dir(ks.unwrap().path()).unwrap() {
            files.push(file.unwrap().path());
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_run_is_read_scanned_and_merged_as_if_stored_then_folded() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&SimulatedDisk::new(), dir.path());
    let ks = KeyspaceId::random();
    let hold = hold_the_fold(&store, ks);
    // Sled holds a newer `a`; the run an older `a`, `b`, and a tombstone
    // `c` over an older value in sled.
    store.apply(ks, b"a", live(10, "a-sled-10")).await.unwrap();
    store.apply(ks, b"c", live(3, "c-sled-3")).await.unwrap();
    let run_cells = vec![
        (b"a".to_vec(), live(5, "a-run-5")),
        (b"b".to_vec(), live(7, "b-run-7")),
        (b"c".to_vec(), Cell::tombstone(Timestamp(9))),
    ];
    ingest(&store, ks, run_cells).await;
    assert_eq!(store.runs_pending(), (1, 3));

    let expected = |b: Cell| {
        vec![
            (b"a".to_vec(), live(10, "a-sled-10")),
            (b"b".to_vec(), b),
            (b"c".to_vec(), Cell::tombstone(Timestamp(9))),
        ]
    };
    assert_eq!(store.read(ks, b"a").unwrap(), Some(live(10, "a-sled-10")));
    assert_eq!(store.read(ks, b"b").unwrap(), Some(live(7, "b-run-7")));
    assert_eq!(
        store.read(ks, b"c").unwrap(),
        Some(Cell::tombstone(Timestamp(9)))
    );
    assert_eq!(store.read(ks, b"d").unwrap(), None);
    assert_eq!(
        in_token_order(scanned(&store, ks)),
        in_token_order(expected(live(7, "b-run-7")))
    );
    // A write merges with the run's cell: an older one loses to it, a
    // newer one wins.
    assert_eq!(
        store.apply(ks, b"b", live(6, "b-6")).await.unwrap(),
        live(7, "b-run-7")
    );
    assert_eq!(
        store.apply(ks, b"b", live(8, "b-8")).await.unwrap(),
        live(8, "b-8")
    );
    assert_eq!(store.read(ks, b"b").unwrap(), Some(live(8, "b-8")));
    // Load counts the run's cells as well as the engine's.
    assert!(store.keyspace_counts(ks).keys >= 3);

    drop(hold);
    wait_for_the_fold(&store).await;
    assert!(
        run_files(dir.path()).is_empty(),
        "a folded run's file is deleted"
    );
    assert_eq!(
        in_token_order(scanned(&store, ks)),
        in_token_order(expected(live(8, "b-8")))
    );
    // Once folded, the counts are exactly what the engine holds.
    let counts = store.keyspace_counts(ks);
    let bytes: usize = scanned(&store, ks)
        .iter()
        .map(|(key, cell)| key.len() + cell.encode().len())
        .sum();
    assert_eq!(
        (counts.keys, counts.tombstones, counts.bytes),
        (3, 1, bytes as u64)
    );
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_folds_first_so_a_purged_tombstone_uncovers_no_older_run_cell() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&SimulatedDisk::new(), dir.path());
    let ks = KeyspaceId::random();
    let hold = hold_the_fold(&store, ks);
    let tombstone = Cell::tombstone(Timestamp(10));
    store.apply(ks, b"k", tombstone.clone()).await.unwrap();
    ingest(&store, ks, vec![(b"k".to_vec(), live(5, "k-run-5"))]).await;
    assert_eq!(store.read(ks, b"k").unwrap(), Some(tombstone.clone()));
    // Garbage collection purges the tombstone while the fold is held.
    let purged = store
        .purge_unchanged(ks, vec![(b"k".to_vec(), tombstone)])
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert_eq!(
        store.read(ks, b"k").unwrap(),
        None,
        "the run's older value came back"
    );
    assert_eq!(store.runs_pending(), (0, 0));
    drop(hold);
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_a_restart_out_of_order_cells_start_a_new_run_and_a_drop_deletes_them() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimulatedDisk::new();
    let store = open(&disk, dir.path());
    let ks = KeyspaceId::random();
    let hold = hold_the_fold(&store, ks);
    let cells: Vec<(Vec<u8>, Cell)> = (0..500)
        .map(|i| {
            (
                format!("key{i}").into_bytes(),
                live(i, &format!("value{i}-{}", "x".repeat(200))),
            )
        })
        .collect();
    let mut ordered = in_token_order(cells.clone());
    // The last 100 again, from the start: they cannot follow in one run.
    let tail = ordered[400..].to_vec();
    ordered.extend(tail);
    let run = store.start_run(ks).unwrap().unwrap();
    let run = store.append_run(run, ordered).await.unwrap();
    store.seal_run(run).await.unwrap();
    assert_eq!(store.runs_pending(), (2, 600));
    store.close().await.unwrap();
    drop(hold);
    drop(store);

    // Reopened (the engine lost what was not flushed, which is nothing the
    // runs hold): the runs are read, then folded.
    disk.crash();
    let store = open(&disk, dir.path());
    for (key, cell) in &cells {
        assert_eq!(store.read(ks, key).unwrap().as_ref(), Some(cell));
    }
    wait_for_the_fold(&store).await;
    assert_eq!(
        in_token_order(scanned(&store, ks)),
        in_token_order(cells.clone())
    );

    // A drop deletes the keyspace's runs, folded or not.
    let hold = hold_the_fold(&store, ks);
    ingest(&store, ks, cells[..10].to_vec()).await;
    assert!(!run_files(dir.path()).is_empty());
    store.drop_keyspace(ks).await.unwrap();
    drop(hold);
    assert!(
        run_files(dir.path())
            .iter()
            .all(|f| f.extension().is_some_and(|e| e == "tmp"))
            || run_files(dir.path()).is_empty()
    );
    assert_eq!(store.runs_pending(), (0, 0));
    store.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_runs_read_as_corruption_are_set_aside_by_the_fold_and_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let disk = SimulatedDisk::new();
    let ks = KeyspaceId::random();
    let cells: Vec<(Vec<u8>, Cell)> = (0..2000)
        .map(|i| (format!("key{i}").into_bytes(), live(i, &"v".repeat(100))))
        .collect();
    let flip = |offset_from_end: Option<u64>| {
        let file = run_files(dir.path()).pop().unwrap();
        let mut bytes = std::fs::read(&file).unwrap();
        let at = match offset_from_end {
            Some(back) => bytes.len() - back as usize,
            None => 100,
        };
        bytes[at] ^= 0x40;
        std::fs::write(&file, bytes).unwrap();
    };

    // A block damaged on disk under an open run: a read of a key in it
    // fails as corruption, never as a wrong answer.
    let store = open(&disk, dir.path());
    let hold = hold_the_fold(&store, ks);
    ingest(&store, ks, cells.clone()).await;
    flip(None);
    assert_eq!(store.run_damage(), 0);
    let first = in_token_order(cells.clone())[0].0.clone();
    let error = store.read(ks, &first).unwrap_err();
    assert!(error.is_corruption(), "{error}");
    assert!(store.scan(ks, whole_ring()).unwrap().any(|e| e.is_err()));
    // The fold meets the damage and sets the run aside, so neither it nor
    // a purge (which folds first) is stalled by it.
    drop(hold);
    wait_for_the_fold(&store).await;
    assert_eq!(store.run_damage(), 1);
    store.purge(ks, &[b"key1".to_vec()]).await.unwrap();
    let aside: Vec<PathBuf> = run_files(dir.path());
    assert_eq!(aside.len(), 1);
    assert!(
        aside[0].to_string_lossy().ends_with(".run.damaged"),
        "{aside:?}"
    );
    std::fs::rename(&aside[0], aside[0].with_extension("")).unwrap();
    store.close().await.unwrap();
    drop(store);

    // A damaged footer: the run is not read and counts as damage.
    flip(Some(20));
    let store = open(&disk, dir.path());
    assert_eq!(store.run_damage(), 1);
    assert_eq!(store.runs_pending(), (0, 0));
    assert_eq!(store.read(ks, &first).unwrap(), None);
    store.close().await.unwrap();
}

/// The number of runs at which the fold goes on while held
/// (`runs::FOLD_ANYWAY_AT`).
const FOLD_ANYWAY_AT: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_load_holds_the_fold_off_between_runs_until_64_runs_wait() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&SimulatedDisk::new(), dir.path());
    let ks = KeyspaceId::random();
    let load = store.hold_fold();
    let run_of = |i: usize| vec![(format!("key{i}").into_bytes(), live(1, &format!("v{i}")))];
    // Between one run's seal and the next run's start no run is being
    // written: only the hold keeps the fold off then.
    for i in 0..FOLD_ANYWAY_AT - 1 {
        ingest(&store, ks, run_of(i)).await;
    }
    assert_eq!(
        store.runs_pending().0,
        FOLD_ANYWAY_AT - 1,
        "folded while held"
    );
    // One more, and the fold goes on to keep the runs bounded, stopping
    // again below the bound while the load still holds it.
    ingest(&store, ks, run_of(FOLD_ANYWAY_AT - 1)).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.runs_pending().0 >= FOLD_ANYWAY_AT {
        assert!(
            Instant::now() < deadline,
            "{FOLD_ANYWAY_AT} runs and no fold"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(store.runs_pending().0, FOLD_ANYWAY_AT - 1);
    drop(load);
    wait_for_the_fold(&store).await;
    let keys: Vec<Vec<u8>> = scanned(&store, ks).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys.len(), FOLD_ANYWAY_AT);
}
