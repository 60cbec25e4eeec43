//! The store's behaviour over the in-memory engine (and sled where the disk
//! matters): last-write-wins merging, token-ordered scans, keyspace drops,
//! metadata and shutdown.

use std::sync::Arc;

use proptest::prelude::*;
use ringstore_placement::{Murmur3Partitioner, Token, TokenRange};
use ringstore_storage::{
    Cell, CellDamage, DataTree, Durability, Engine, KeyspaceId, MemoryEngine, SledEngine,
    SledOptions, StorageError, Store, Timestamp,
};

fn memory_store() -> Store {
    Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap()
}

fn live(ts: i64, value: &[u8]) -> Cell {
    Cell::live(Timestamp(ts), value.to_vec())
}

fn token(key: &[u8]) -> Token {
    Murmur3Partitioner::token(key).unwrap()
}

#[tokio::test]
async fn an_older_write_arriving_after_a_newer_one_loses() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    assert_eq!(
        store.apply(ks, b"k", live(20, b"new")).await.unwrap(),
        live(20, b"new")
    );
    assert_eq!(
        store.apply(ks, b"k", live(10, b"old")).await.unwrap(),
        live(20, b"new")
    );
    assert_eq!(store.read(ks, b"k").unwrap(), Some(live(20, b"new")));
}

#[tokio::test]
async fn a_tombstone_hides_the_value_it_supersedes_and_an_older_write_cannot_revive_it() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    store.apply(ks, b"k", live(10, b"v")).await.unwrap();
    store
        .apply(ks, b"k", Cell::tombstone(Timestamp(11)))
        .await
        .unwrap();
    store.apply(ks, b"k", live(9, b"late")).await.unwrap();
    let stored = store.read(ks, b"k").unwrap().unwrap();
    assert_eq!(stored, Cell::tombstone(Timestamp(11)));
    assert_eq!(stored.visible_value(Timestamp::now()), None);
}

#[tokio::test]
async fn on_equal_timestamps_the_tombstone_then_the_greater_value_wins_in_any_order() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    store.apply(ks, b"a", live(5, b"x")).await.unwrap();
    store.apply(ks, b"a", live(5, b"y")).await.unwrap();
    store.apply(ks, b"b", live(5, b"y")).await.unwrap();
    store.apply(ks, b"b", live(5, b"x")).await.unwrap();
    assert_eq!(store.read(ks, b"a").unwrap(), Some(live(5, b"y")));
    assert_eq!(store.read(ks, b"b").unwrap(), Some(live(5, b"y")));
    store
        .apply(ks, b"a", Cell::tombstone(Timestamp(5)))
        .await
        .unwrap();
    store.apply(ks, b"a", live(5, b"zzz")).await.unwrap();
    assert_eq!(
        store.read(ks, b"a").unwrap(),
        Some(Cell::tombstone(Timestamp(5)))
    );
}

#[tokio::test]
async fn concurrent_applies_to_one_key_converge_on_the_newest() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { store.apply(ks, b"hot", live(i, &[i as u8])).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert_eq!(store.read(ks, b"hot").unwrap(), Some(live(31, &[31])));
}

#[tokio::test]
async fn apply_many_applies_every_write_and_returns_the_winners() {
    let store = memory_store();
    let (a, b) = (KeyspaceId::random(), KeyspaceId::random());
    store.apply(a, b"k", live(50, b"newer")).await.unwrap();
    let winners = store
        .apply_many(&[
            (a, b"k".to_vec(), live(10, b"older")),
            (a, b"j".to_vec(), live(10, b"j")),
            (b, b"k".to_vec(), live(10, b"other keyspace")),
        ])
        .await
        .unwrap();
    assert_eq!(
        winners,
        vec![
            live(50, b"newer"),
            live(10, b"j"),
            live(10, b"other keyspace")
        ]
    );
    assert_eq!(
        store.read(b, b"k").unwrap(),
        Some(live(10, b"other keyspace"))
    );
}

/// A bulk load guesses each key absent (one lookup saved per new key);
/// where a cell is there after all, last-write-wins still decides, and the
/// load counts each key once. On sled, whose engine acts on the guess.
#[tokio::test]
async fn a_bulk_load_into_keys_already_written_keeps_the_newer_cells() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(SledEngine::open(dir.path(), SledOptions::small()).unwrap());
    let store = Store::open(engine, Durability::Batch).unwrap();
    let ks = KeyspaceId::random();
    store
        .apply(ks, b"newer there", live(50, b"kept"))
        .await
        .unwrap();
    store
        .apply(ks, b"older there", live(5, b"stale"))
        .await
        .unwrap();
    let bulk = |key: &[u8], value: &[u8]| (ks, key.to_vec(), live(10, value));
    let winners = store
        .apply_many_unflushed(vec![
            bulk(b"newer there", b"loses"),
            bulk(b"older there", b"wins"),
            bulk(b"absent", b"new"),
        ])
        .await
        .unwrap();
    assert_eq!(
        winners,
        vec![live(50, b"kept"), live(10, b"wins"), live(10, b"new")]
    );
    let expected = [
        (&b"newer there"[..], live(50, b"kept")),
        (b"older there", live(10, b"wins")),
        (b"absent", live(10, b"new")),
    ];
    let mut bytes = 0;
    for (key, cell) in expected {
        assert_eq!(store.read(ks, key).unwrap(), Some(cell.clone()), "{key:?}");
        bytes += (key.len() + cell.encode().len()) as u64;
    }
    assert_eq!(store.keyspace_bytes(ks), bytes, "each key counted once");
}

#[tokio::test]
async fn the_empty_key_is_refused() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    let error = store.apply(ks, b"", live(1, b"v")).await.unwrap_err();
    assert!(matches!(error, StorageError::InvalidKey { .. }));
    assert!(matches!(
        store.read(ks, b""),
        Err(StorageError::InvalidKey { .. })
    ));
}

/// The engine's key of `key`: its token's ordered bytes, then the key.
fn data_key(key: &[u8]) -> Vec<u8> {
    let mut data_key = token(key).to_ordered_bytes().to_vec();
    data_key.extend_from_slice(key);
    data_key
}

/// Flips one bit of the value stored at `key` in `tree`, as a disk or an
/// engine's cache might.
fn flip_a_bit(tree: &dyn ringstore_storage::Tree, key: &[u8], bit: usize) {
    let mut bytes = tree.get(&data_key(key)).unwrap().expect("stored");
    bytes[bit / 8] ^= 1 << (bit % 8);
    tree.insert(&data_key(key), &bytes).unwrap();
}

#[tokio::test]
async fn a_damaged_stored_cell_fails_reads_and_scans_naming_its_key_and_is_counted() {
    let engine = Arc::new(MemoryEngine::new());
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    let ks = KeyspaceId::random();
    store.apply(ks, b"k", live(50, b"value")).await.unwrap();
    store.apply(ks, b"other", live(50, b"fine")).await.unwrap();
    let tree = engine.open_tree(&ks.data_tree_name()).unwrap();
    // A bit of the value: the layout holds, only the checksum tells.
    flip_a_bit(tree.as_ref(), b"k", 8 * 12);
    assert_eq!(store.corrupt_reads(), 0);

    let read = store.read(ks, b"k").unwrap_err();
    assert!(read.is_corruption(), "{read}");
    assert!(
        matches!(
            &read,
            StorageError::CorruptCell { reason: CellDamage::Checksum { .. }, key: Some(key) }
                if key == b"k"
        ),
        "{read:?}"
    );
    assert!(read.to_string().contains("at key k"), "{read}");
    assert_eq!(store.corrupt_reads(), 1);

    let scanned: Vec<_> = store
        .scan(ks, TokenRange::new(Token(0), Token(0)))
        .unwrap()
        .collect();
    assert_eq!(scanned.len(), 2, "the scan goes on after the damaged row");
    let damaged: Vec<_> = scanned
        .iter()
        .filter_map(|entry| entry.as_ref().err())
        .collect();
    assert!(
        matches!(damaged[..], [StorageError::CorruptCell { key: Some(key), .. }] if key == b"k"),
        "{scanned:?}"
    );
    assert!(scanned.iter().any(|entry| {
        entry
            .as_ref()
            .is_ok_and(|(_, key, cell)| key == b"other" && *cell == live(50, b"fine"))
    }));
    assert_eq!(store.corrupt_reads(), 2);
}

#[tokio::test]
async fn any_write_replaces_a_damaged_cell_even_an_older_one_and_the_counts_stay_exact() {
    let engine = Arc::new(MemoryEngine::new());
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    let ks = KeyspaceId::random();
    store.apply(ks, b"k", live(50, b"newest")).await.unwrap();
    let tree = engine.open_tree(&ks.data_tree_name()).unwrap();
    flip_a_bit(tree.as_ref(), b"k", 8 * 12 + 3);

    // Read repair, repair or a hint may bring an older version than the
    // damaged one held: it is what this replica can serve now.
    let winner = store.apply(ks, b"k", live(10, b"older")).await.unwrap();
    assert_eq!(winner, live(10, b"older"));
    assert_eq!(store.read(ks, b"k").unwrap(), Some(live(10, b"older")));
    assert_eq!(store.corrupt_reads(), 1, "the merge met it once");
    // From then on, LWW as ever.
    assert_eq!(
        store.apply(ks, b"k", live(5, b"oldest")).await.unwrap(),
        live(10, b"older")
    );
    let stored_bytes = (1 + live(10, b"older").encoded_len()) as u64;
    assert_eq!(store.keyspace_bytes(ks), stored_bytes);
    assert_eq!(store.keyspace_counts(ks).keys, 1);
}

#[tokio::test]
async fn a_damaged_cell_whose_layout_still_holds_is_replaced_by_a_bulk_load_too() {
    let engine = Arc::new(MemoryEngine::new());
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    let ks = KeyspaceId::random();
    store
        .apply(ks, b"k", Cell::tombstone(Timestamp(9)))
        .await
        .unwrap();
    let tree = engine.open_tree(&ks.data_tree_name()).unwrap();
    // The tombstone flag itself: the flags still parse, the checksum does not.
    flip_a_bit(tree.as_ref(), b"k", 8);
    let winners = store
        .apply_many_unflushed(vec![(ks, b"k".to_vec(), live(3, b"streamed"))])
        .await
        .unwrap();
    assert_eq!(winners, vec![live(3, b"streamed")]);
    assert_eq!(store.read(ks, b"k").unwrap(), Some(live(3, b"streamed")));
    assert_eq!(store.corrupt_reads(), 1);
}

#[tokio::test]
async fn cells_of_the_old_format_read_back_and_a_write_stores_them_in_the_new_one() {
    let engine = Arc::new(MemoryEngine::new());
    let store = Store::open(engine.clone(), Durability::Batch).unwrap();
    let ks = KeyspaceId::random();
    let tree = engine.open_tree(&ks.data_tree_name()).unwrap();
    let old = live(20, b"written by an earlier build");
    for key in [&b"loses"[..], b"wins"] {
        tree.insert(&data_key(key), &old.canonical_bytes()).unwrap();
        assert_eq!(store.read(ks, key).unwrap(), Some(old.clone()));
    }
    store.apply(ks, b"loses", live(10, b"older")).await.unwrap();
    store.apply(ks, b"wins", live(30, b"newer")).await.unwrap();
    assert_eq!(store.read(ks, b"loses").unwrap(), Some(old.clone()));
    assert_eq!(store.read(ks, b"wins").unwrap(), Some(live(30, b"newer")));
    for (key, cell) in [(&b"loses"[..], old), (b"wins", live(30, b"newer"))] {
        let stored = tree.get(&data_key(key)).unwrap().unwrap();
        assert_eq!(stored, cell.encode(), "{key:?} is stored in the new format");
    }
    assert_eq!(store.corrupt_reads(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commit_log_s_replay_heals_a_cell_damaged_in_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let log = ringstore_storage::CommitLogOptions {
        checkpoint_interval: std::time::Duration::from_secs(3600),
        ..ringstore_storage::CommitLogOptions::new(dir.path().join("commitlog"))
    };
    let engine = Arc::new(MemoryEngine::new());
    let ks = KeyspaceId::random();
    let store =
        Store::open_with_commit_log(engine.clone(), Durability::Batch, log.clone()).unwrap();
    store.apply(ks, b"k", live(7, b"logged")).await.unwrap();
    drop(store);
    let tree = engine.open_tree(&ks.data_tree_name()).unwrap();
    flip_a_bit(tree.as_ref(), b"k", 8 * 14);

    // The replay merges the logged cell over the damaged one: before
    // damaged cells were replaced, this open failed.
    let store = Store::open_with_commit_log(engine.clone(), Durability::Batch, log).unwrap();
    assert_eq!(store.read(ks, b"k").unwrap(), Some(live(7, b"logged")));
    assert_eq!(store.corrupt_reads(), 1);
}

#[tokio::test]
async fn a_dropped_keyspace_is_refused_and_a_recreated_one_starts_empty() {
    let store = memory_store();
    let old = KeyspaceId::random();
    store.apply(old, b"k", live(1, b"v")).await.unwrap();
    assert_eq!(store.stored_keyspaces(), vec![old]);
    assert!(store.drop_keyspace(old).await.unwrap());
    assert!(store.stored_keyspaces().is_empty());
    assert!(matches!(
        store.read(old, b"k"),
        Err(StorageError::KeyspaceDropped { keyspace }) if keyspace == old
    ));
    assert!(store.apply(old, b"k", live(2, b"v")).await.is_err());

    let recreated = KeyspaceId::random();
    assert_eq!(store.read(recreated, b"k").unwrap(), None);
    let everything = TokenRange::new(Token::MIN, Token::MIN);
    assert_eq!(store.scan(recreated, everything).unwrap().count(), 0);
}

#[tokio::test]
async fn metadata_survives_reopening_a_sled_store() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    {
        let engine = Arc::new(SledEngine::open(dir.path(), SledOptions::small()).unwrap());
        let store = Store::open(engine, Durability::Batch).unwrap();
        store.meta_put("host_id", b"abc").await.unwrap();
        store.apply(ks, b"k", live(7, b"v")).await.unwrap();
        store.hints().insert(b"hint", b"h").unwrap();
        store.close().await.unwrap();
        assert!(store.load_bytes() > 0 && store.disk_bytes().unwrap() > 0);
    }
    let engine = Arc::new(SledEngine::open(dir.path(), SledOptions::small()).unwrap());
    let store = Store::open(engine, Durability::Batch).unwrap();
    assert_eq!(store.meta_get("host_id").unwrap(), Some(b"abc".to_vec()));
    assert_eq!(store.meta_get("tokens").unwrap(), None);
    assert_eq!(store.read(ks, b"k").unwrap(), Some(live(7, b"v")));
    assert_eq!(store.hints().get(b"hint").unwrap(), Some(b"h".to_vec()));
    assert_eq!(store.stored_keyspaces(), vec![ks]);
}

#[tokio::test]
async fn a_closed_store_refuses_writes_but_still_reads() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    store.apply(ks, b"k", live(1, b"v")).await.unwrap();
    store.close().await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        store.apply(ks, b"k", live(2, b"w")).await,
        Err(StorageError::Closed)
    ));
    assert!(matches!(
        store.meta_put("x", b"y").await,
        Err(StorageError::Closed)
    ));
    assert!(matches!(
        store.drop_keyspace(ks).await,
        Err(StorageError::Closed)
    ));
    assert_eq!(store.read(ks, b"k").unwrap(), Some(live(1, b"v")));
}

#[tokio::test]
async fn a_wrapping_scan_returns_tokens_in_ring_order_from_the_minimum() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    let keys: Vec<Vec<u8>> = (0..200u32)
        .map(|i| format!("key{i}").into_bytes())
        .collect();
    for key in &keys {
        store.apply(ks, key, live(1, key)).await.unwrap();
    }
    let range = TokenRange::new(Token(i64::MAX / 2), Token(i64::MIN / 2));
    let scanned: Vec<Token> = store
        .scan(ks, range)
        .unwrap()
        .map(|e| e.unwrap().0)
        .collect();
    assert!(scanned.windows(2).all(|w| w[0] <= w[1]));
    assert!(scanned.iter().all(|t| range.contains(*t)));
    assert!(scanned.first().unwrap() < &Token(0) && scanned.last().unwrap() > &Token(0));
}

fn any_bound(tokens: Vec<Token>) -> impl Strategy<Value = Token> {
    let edges = prop_oneof![Just(Token::MIN), Just(Token::MAX), Just(Token(0))];
    let near_keys = (proptest::sample::select(tokens), -1i64..=1)
        .prop_map(|(token, delta)| token.advance(delta as u64));
    prop_oneof![any::<i64>().prop_map(Token), edges, near_keys]
}

fn keys_and_range() -> impl Strategy<Value = (Vec<Vec<u8>>, TokenRange)> {
    proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..12), 1..60)
        .prop_flat_map(|keys| {
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let tokens: Vec<Token> = keys.iter().map(|k| token(k)).collect();
            let bounds = (any_bound(tokens.clone()), any_bound(tokens));
            (
                Just(keys),
                bounds.prop_map(|(start, end)| TokenRange::new(start, end)),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_scan_returns_exactly_the_keys_whose_tokens_the_range_contains((keys, range) in keys_and_range()) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
        let ks = KeyspaceId::random();
        let writes: Vec<_> = keys.iter().map(|k| (ks, k.clone(), live(1, k))).collect();
        runtime.block_on(store.apply_many(&writes)).unwrap();

        let scanned: Vec<(Token, Vec<u8>)> = store
            .scan(ks, range)
            .unwrap()
            .map(|entry| {
                let (token, key, cell) = entry.unwrap();
                assert_eq!(cell.value.as_deref(), Some(&key[..]));
                (token, key)
            })
            .collect();
        let mut expected: Vec<(Token, Vec<u8>)> = keys
            .iter()
            .map(|k| (token(k), k.clone()))
            .filter(|(t, _)| range.contains(*t))
            .collect();
        expected.sort();
        prop_assert_eq!(scanned, expected);
    }
}

#[tokio::test]
async fn purge_removes_cells_outright_without_tombstones() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    store.apply(ks, b"a", live(1, b"x")).await.unwrap();
    store.apply(ks, b"b", live(1, b"y")).await.unwrap();
    let removed = store
        .purge(ks, &[b"a".to_vec(), b"missing".to_vec()])
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert_eq!(store.read(ks, b"a").unwrap(), None, "no tombstone is left");
    assert_eq!(store.read(ks, b"b").unwrap(), Some(live(1, b"y")));
}

#[tokio::test]
async fn purge_unchanged_keeps_a_cell_overwritten_since_it_was_chosen() {
    let store = memory_store();
    let ks = KeyspaceId::random();
    let dead = Cell::tombstone(Timestamp(5));
    store.apply(ks, b"gone", dead.clone()).await.unwrap();
    store.apply(ks, b"rewritten", dead.clone()).await.unwrap();
    // A newer write lands after garbage collection chose the tombstone.
    store
        .apply(ks, b"rewritten", live(9, b"new"))
        .await
        .unwrap();
    let removed = store
        .purge_unchanged(
            ks,
            vec![
                (b"gone".to_vec(), dead.clone()),
                (b"rewritten".to_vec(), dead.clone()),
                (b"missing".to_vec(), dead),
            ],
        )
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert_eq!(store.read(ks, b"gone").unwrap(), None);
    assert_eq!(store.read(ks, b"rewritten").unwrap(), Some(live(9, b"new")));
}
