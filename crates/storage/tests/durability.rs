//! Durability through the store: group commit in batch mode, the background
//! flusher in periodic mode. A `CountingEngine` keeps a logical clock of
//! writes and flushes, so "returned only after a flush that started after its
//! write" is checked from its books, and periodic flushing runs on paused
//! tokio time.

mod support;

use std::sync::Arc;
use std::time::Duration;

use ringstore_placement::Murmur3Partitioner;
use ringstore_storage::{
    Cell, Durability, KeyspaceId, SimulatedDisk, StorageError, Store, Timestamp,
};
use support::CountingEngine;

const WRITERS: usize = 64;

fn data_key(key: &[u8]) -> Vec<u8> {
    let mut bytes = Murmur3Partitioner::token(key)
        .unwrap()
        .to_ordered_bytes()
        .to_vec();
    bytes.extend_from_slice(key);
    bytes
}

fn cell(value: &[u8]) -> Cell {
    Cell::live(Timestamp(1), value.to_vec())
}

/// Runs `WRITERS` concurrent applies of distinct keys and checks from the
/// engine's books that each returned only after a flush that started after
/// its write had been applied.
async fn concurrent_applies_each_wait_for_a_covering_flush(store: &Store, engine: &CountingEngine) {
    let ks = KeyspaceId::random();
    let tasks: Vec<_> = (0..WRITERS)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let key = format!("writer-{i}").into_bytes();
                store.apply(ks, &key, cell(&key)).await.unwrap();
                key
            })
        })
        .collect();
    let mut returned = Vec::new();
    for task in tasks {
        // A safety net: a lost wakeup fails the test instead of hanging it.
        let key = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("a writer was never woken")
            .unwrap();
        // Observed after the apply returned, so the clock is at or past its return.
        returned.push((key, engine.tick()));
    }
    for (key, returned_at) in returned {
        let written_at = engine.write_time(&data_key(&key)).unwrap();
        assert!(
            engine.durable_between(written_at, returned_at),
            "{} returned without a flush that started after its write",
            String::from_utf8_lossy(&key)
        );
    }
}

/// On a single-threaded runtime each apply's write and ticket run without
/// another writer in between, and the first flush (a slow disk) completes only
/// once all 64 writers have written. So the first writer leads flush 1, every
/// other writer took its ticket while flush 1 ran and shares flush 2: exactly
/// two flushes for 64 writes, deterministically.
#[tokio::test]
async fn concurrent_batch_writers_share_flushes_and_each_waits_for_a_flush_after_its_write() {
    let engine = CountingEngine::holding_first_flush_until(WRITERS);
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    concurrent_applies_each_wait_for_a_covering_flush(&store, &engine).await;
    assert_eq!(
        engine.flushes().len(),
        2,
        "two flushes for {WRITERS} writes"
    );
}

/// With real parallelism the grouping depends on scheduling, but every writer
/// must still wait for a flush after its write, and none may be left asleep.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn batch_writers_never_miss_a_wakeup_over_many_rounds() {
    let engine = CountingEngine::new();
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    for _ in 0..20 {
        concurrent_applies_each_wait_for_a_covering_flush(&store, &engine).await;
    }
    assert!(engine.flushes().len() <= 20 * WRITERS);
}

#[tokio::test]
async fn a_failed_flush_fails_the_batch_write_it_covers() {
    let engine = CountingEngine::new();
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    let ks = KeyspaceId::random();
    engine.set_failing(true);
    let error = store.apply(ks, b"k", cell(b"v")).await.unwrap_err();
    assert!(matches!(error, StorageError::FlushFailed { .. }));
    assert!(error.is_retryable());
    // Applied, though not known durable; the next flush makes it so.
    assert_eq!(store.read(ks, b"k").unwrap(), Some(cell(b"v")));
    engine.set_failing(false);
    store.sync().await.unwrap();
}

#[tokio::test]
async fn metadata_writes_and_keyspace_drops_are_durable_even_in_periodic_mode() {
    let engine = CountingEngine::new();
    let store = Store::open(
        engine.clone(),
        Durability::Periodic {
            interval: Duration::from_secs(3600),
        },
    )
    .unwrap();
    store.meta_put("host_id", b"h1").await.unwrap();
    let returned = engine.tick();
    let written = engine.write_time(b"host_id").unwrap();
    assert!(engine.durable_between(written, returned));
    let flushes = engine.flushes().len();
    store.drop_keyspace(KeyspaceId::random()).await.unwrap();
    assert_eq!(engine.flushes().len(), flushes + 1);
}

#[tokio::test(start_paused = true)]
async fn periodic_writes_return_before_any_flush_and_are_flushed_within_one_interval() {
    let interval = Duration::from_millis(500);
    let engine = CountingEngine::new();
    let store = Store::open(engine.clone(), Durability::Periodic { interval }).unwrap();
    let mut flushed = engine.flush_count();
    let start = tokio::time::Instant::now();

    let ks = KeyspaceId::random();
    store.apply(ks, b"k", cell(b"v")).await.unwrap();
    assert!(engine.flushes().is_empty(), "acknowledged without flushing");
    let written = engine.write_time(&data_key(b"k")).unwrap();

    tokio::time::timeout(2 * interval, flushed.wait_for(|&n| n >= 1))
        .await
        .expect("no flush within two intervals")
        .unwrap();
    assert!(engine.durable_between(written, engine.tick()));
    let elapsed = start.elapsed();
    assert!(
        elapsed >= interval && elapsed < interval + Duration::from_millis(50),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_periodic_flusher_keeps_flushing_every_interval() {
    let interval = Duration::from_millis(100);
    let engine = CountingEngine::new();
    let _store = Store::open(engine.clone(), Durability::Periodic { interval }).unwrap();
    let mut flushed = engine.flush_count();
    let start = tokio::time::Instant::now();
    tokio::time::timeout(20 * interval, flushed.wait_for(|&n| n >= 10))
        .await
        .expect("ten flushes within twenty intervals")
        .unwrap();
    let elapsed = start.elapsed();
    assert!(
        elapsed >= 10 * interval && elapsed < 11 * interval,
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_last_store_stops_the_periodic_flusher_after_a_final_flush() {
    let interval = Duration::from_millis(100);
    let engine = CountingEngine::new();
    let store = Store::open(engine.clone(), Durability::Periodic { interval }).unwrap();
    let ks = KeyspaceId::random();
    store.apply(ks, b"k", cell(b"v")).await.unwrap();
    let written = engine.write_time(&data_key(b"k")).unwrap();
    let clone = store.clone();
    drop(store);
    drop(clone);

    let mut flushed = engine.flush_count();
    tokio::time::timeout(interval / 2, flushed.wait_for(|&n| n >= 1))
        .await
        .expect("a final flush before the first tick")
        .unwrap();
    assert!(engine.durable_between(written, engine.tick()));
    // Let many intervals pass: the task has ended, nothing else flushes.
    tokio::time::sleep(10 * interval).await;
    assert_eq!(engine.flushes().len(), 1);
    assert_eq!(
        Arc::strong_count(&engine),
        1,
        "the flusher let go of the engine"
    );
}

#[tokio::test(start_paused = true)]
async fn closing_a_periodic_store_flushes_and_stops_the_flusher() {
    let interval = Duration::from_millis(100);
    let engine = CountingEngine::new();
    let store = Store::open(engine.clone(), Durability::Periodic { interval }).unwrap();
    store
        .apply(KeyspaceId::random(), b"k", cell(b"v"))
        .await
        .unwrap();
    let written = engine.write_time(&data_key(b"k")).unwrap();
    store.close().await.unwrap();
    assert!(engine.durable_between(written, engine.tick()));
    let flushes = engine.flushes().len();
    tokio::time::sleep(10 * interval).await;
    assert_eq!(engine.flushes().len(), flushes);
}

#[tokio::test(start_paused = true)]
async fn sync_in_periodic_mode_flushes_now() {
    let engine = CountingEngine::new();
    let store = Store::open(
        engine.clone(),
        Durability::Periodic {
            interval: Duration::from_secs(60),
        },
    )
    .unwrap();
    store
        .apply(KeyspaceId::random(), b"k", cell(b"v"))
        .await
        .unwrap();
    let written = engine.write_time(&data_key(b"k")).unwrap();
    let start = tokio::time::Instant::now();
    store.sync().await.unwrap();
    assert!(engine.durable_between(written, engine.tick()));
    assert!(start.elapsed() < Duration::from_secs(1));
}

/// On a current-thread runtime the test's own thread is the only async
/// worker: an engine call seen on it ran inline, blocking every task.
/// (Single-key applies and reads run inline by design: see "Threads" in the
/// store's docs.)
#[tokio::test]
async fn multi_key_engine_calls_run_off_the_async_workers() {
    let engine = CountingEngine::new();
    // Opening reads (and after a crash scans) on the caller's thread, so a
    // node opens its store off the workers too.
    let opening = engine.clone();
    let store = tokio::task::spawn_blocking(move || Store::open(opening, Durability::Batch))
        .await
        .unwrap()
        .unwrap();
    let ks = KeyspaceId::random();
    store
        .apply_many(&[
            (ks, b"j".to_vec(), cell(b"w")),
            (ks, b"k".to_vec(), cell(b"v")),
        ])
        .await
        .unwrap();
    store.purge(ks, &[b"j".to_vec()]).await.unwrap();
    store.meta_put("name", b"value").await.unwrap();
    store.drop_keyspace(ks).await.unwrap();
    let threads = engine.tree_threads();
    assert!(!threads.is_empty());
    assert!(
        !threads.contains(&std::thread::current().id()),
        "an engine call ran on the async worker"
    );
}

#[tokio::test]
async fn every_engine_flush_is_reported_to_the_sync_observer() {
    let engine = CountingEngine::new();
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    let observed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = observed.clone();
    assert!(store.observe_syncs(move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }));
    assert!(
        !store.observe_syncs(|_| {}),
        "only the first observer is set"
    );
    let ks = KeyspaceId::random();
    for i in 0..3u8 {
        store.apply(ks, &[b'k', i], cell(b"v")).await.unwrap();
    }
    store.sync().await.unwrap();
    assert_eq!(
        observed.load(std::sync::atomic::Ordering::SeqCst),
        engine.flushes().len()
    );
    assert!(engine.flushes().len() >= 4);
}

/// Unflushed writes and metadata wait for no flush, are lost together in a
/// crash before one, and the next flush, whoever asks for it, keeps both.
#[tokio::test]
async fn unflushed_writes_become_durable_with_the_next_flush() {
    let disk = SimulatedDisk::new();
    let open = || Store::open(Arc::new(disk.clone()), Durability::Batch).unwrap();
    let ks = KeyspaceId::random();
    let writes = |version: &str| -> Vec<(KeyspaceId, Vec<u8>, Cell)> {
        (0..20)
            .map(|i| {
                let key = format!("key{i}").into_bytes();
                (ks, key, cell(format!("{version}-{i}").as_bytes()))
            })
            .collect()
    };
    let value_of = |store: &Store, i: usize| {
        store
            .read(ks, format!("key{i}").as_bytes())
            .unwrap()
            .and_then(|cell| cell.value)
    };

    let store = open();
    store.apply_many_unflushed(writes("first")).await.unwrap();
    store
        .meta_put_unflushed("progress", b"first")
        .await
        .unwrap();
    assert_eq!(
        value_of(&store, 3),
        Some(b"first-3".to_vec()),
        "reads see them"
    );
    drop(store);
    disk.crash();
    let store = open();
    assert_eq!(
        value_of(&store, 3),
        None,
        "no flush: the crash lost the cells"
    );
    assert_eq!(store.meta_get("progress").unwrap(), None, "and the record");

    store.apply_many_unflushed(writes("second")).await.unwrap();
    store
        .meta_put_unflushed("progress", b"second")
        .await
        .unwrap();
    // Another writer's durable write flushes everything before it.
    store.meta_put("other", b"x").await.unwrap();
    drop(store);
    disk.crash();
    let store = open();
    for i in 0..20 {
        assert_eq!(
            value_of(&store, i),
            Some(format!("second-{i}").into_bytes())
        );
    }
    assert_eq!(
        store.meta_get("progress").unwrap(),
        Some(b"second".to_vec())
    );
}

/// Paxos state put durably survives a crash right after the put returns,
/// whatever the mode; state put unflushed is lost in a crash before the
/// next flush, and keyspaces and keys do not share state.
#[tokio::test]
async fn paxos_state_is_durable_when_its_put_returns_even_in_periodic_mode() {
    let disk = SimulatedDisk::new();
    let open = || {
        Store::open(
            Arc::new(disk.clone()),
            Durability::Periodic {
                interval: Duration::from_secs(3600),
            },
        )
        .unwrap()
    };
    let (ks, other) = (KeyspaceId::random(), KeyspaceId::random());

    let store = open();
    store.paxos_put(ks, b"k", b"promised").await.unwrap();
    store.paxos_put_unflushed(ks, b"j", b"mrc").await.unwrap();
    assert_eq!(store.paxos_get(ks, b"j").unwrap(), Some(b"mrc".to_vec()));
    drop(store);
    disk.crash();

    let store = open();
    assert_eq!(
        store.paxos_get(ks, b"k").unwrap(),
        Some(b"promised".to_vec())
    );
    assert_eq!(store.paxos_get(ks, b"j").unwrap(), None, "never flushed");
    assert_eq!(store.paxos_get(other, b"k").unwrap(), None);
    assert_eq!(store.paxos_get(ks, b"kk").unwrap(), None);
    assert_eq!(
        store.read(ks, b"k").unwrap(),
        None,
        "Paxos state is not data"
    );
}
