//! The store's `Load` and keyspace counts: the live bytes of its keys and
//! cells, its keys and its tombstones, kept by every write, purge and drop,
//! and carried across restarts (a clean one through a saved record, a crash
//! through a recount).

use std::sync::Arc;

use proptest::prelude::*;
use ringstore_placement::{Token, TokenRange};
use ringstore_storage::{
    Cell, Durability, KeyspaceCounts, KeyspaceId, MemoryEngine, SledEngine, SledOptions, Store,
    Timestamp,
};

/// The bytes, keys and tombstones of `keyspaces` in `store`, counted from a scan.
fn counted(store: &Store, keyspaces: &[KeyspaceId]) -> KeyspaceCounts {
    let whole = TokenRange::new(Token::MIN, Token::MIN);
    let mut counts = KeyspaceCounts::default();
    for entry in keyspaces
        .iter()
        .flat_map(|ks| store.scan(*ks, whole).unwrap())
    {
        let (_, key, cell) = entry.unwrap();
        counts.bytes += (key.len() + cell.encode().len()) as u64;
        counts.keys += 1;
        counts.tombstones += u64::from(cell.is_tombstone());
    }
    counts
}

fn value(n: usize, len: usize) -> Vec<u8> {
    vec![b'a' + (n % 26) as u8; len]
}

/// One step of a random workload on two keyspaces.
#[derive(Clone, Debug)]
enum Step {
    Put {
        ks: usize,
        key: u8,
        ts: i64,
        len: usize,
    },
    Delete {
        ks: usize,
        key: u8,
        ts: i64,
    },
    Purge {
        ks: usize,
        key: u8,
    },
    PurgeIfUnchanged {
        ks: usize,
        key: u8,
    },
    Drop {
        ks: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..2usize, 0..20u8, 1..50i64, 0..300usize)
            .prop_map(|(ks, key, ts, len)| Step::Put { ks, key, ts, len }),
        2 => (0..2usize, 0..20u8, 1..50i64).prop_map(|(ks, key, ts)| Step::Delete { ks, key, ts }),
        1 => (0..2usize, 0..20u8).prop_map(|(ks, key)| Step::Purge { ks, key }),
        1 => (0..2usize, 0..20u8).prop_map(|(ks, key)| Step::PurgeIfUnchanged { ks, key }),
        1 => Just(Step::Drop { ks: 1 }),
    ]
}

async fn run(store: &Store, keyspaces: &mut [KeyspaceId; 2], step: &Step) {
    let key = |key: &u8| format!("key-{key}").into_bytes();
    match step {
        Step::Put {
            ks,
            key: k,
            ts,
            len,
        } => {
            let cell = Cell::live(Timestamp(*ts), value(*len, *len));
            store.apply(keyspaces[*ks], &key(k), cell).await.unwrap();
        }
        Step::Delete { ks, key: k, ts } => {
            let cell = Cell::deletion(Timestamp(*ts), Timestamp(*ts));
            store.apply(keyspaces[*ks], &key(k), cell).await.unwrap();
        }
        Step::Purge { ks, key: k } => {
            store.purge(keyspaces[*ks], &[key(k)]).await.unwrap();
        }
        Step::PurgeIfUnchanged { ks, key: k } => {
            if let Some(cell) = store.read(keyspaces[*ks], &key(k)).unwrap() {
                let purged = store
                    .purge_unchanged(keyspaces[*ks], vec![(key(k), cell)])
                    .await
                    .unwrap();
                assert_eq!(purged, 1);
            }
        }
        Step::Drop { ks } => {
            store.drop_keyspace(keyspaces[*ks]).await.unwrap();
            keyspaces[*ks] = KeyspaceId::random();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn load_and_counts_are_exact_after_any_sequence_of_writes_purges_and_drops(
        steps in prop::collection::vec(step(), 1..60),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(async {
            let store = Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap();
            let mut keyspaces = [KeyspaceId::random(), KeyspaceId::random()];
            for step in &steps {
                run(&store, &mut keyspaces, step).await;
                assert_eq!(store.load_bytes(), counted(&store, &keyspaces).bytes, "after {step:?}");
                for ks in keyspaces {
                    assert_eq!(store.keyspace_counts(ks), counted(&store, &[ks]), "after {step:?}");
                    assert_eq!(store.keyspace_bytes(ks), counted(&store, &[ks]).bytes);
                }
            }
        });
    }
}

/// Puts `keys` values of 1 KiB with timestamp `ts` into `ks`.
async fn fill(store: &Store, ks: KeyspaceId, keys: std::ops::Range<usize>, ts: i64) {
    for n in keys {
        let cell = Cell::live(Timestamp(ts), value(n, 1024));
        store
            .apply(ks, format!("k{n}").as_bytes(), cell)
            .await
            .unwrap();
    }
}

fn open_sled(dir: &std::path::Path) -> Store {
    let engine = Arc::new(SledEngine::open(dir, SledOptions::small()).unwrap());
    Store::open(engine, Durability::Batch).unwrap()
}

#[tokio::test]
async fn load_survives_a_clean_restart_and_is_recounted_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let ks = KeyspaceId::random();
    let delete = |store: &Store, keys: std::ops::Range<usize>| {
        let store = store.clone();
        async move {
            for n in keys {
                let tombstone = Cell::deletion(Timestamp(2), Timestamp(2));
                store
                    .apply(ks, format!("k{n}").as_bytes(), tombstone)
                    .await
                    .unwrap();
            }
        }
    };
    let before = {
        let store = open_sled(dir.path());
        fill(&store, ks, 0..300, 1).await;
        delete(&store, 0..40).await;
        store.close().await.unwrap();
        store.keyspace_counts(ks)
    };
    assert!(before.bytes > 260 * 1024, "{before:?}");
    assert_eq!((before.keys, before.tombstones), (300, 40));
    // A clean restart takes the saved counts.
    let after_crash = {
        let store = open_sled(dir.path());
        assert_eq!(store.keyspace_counts(ks), before);
        assert_eq!(store.keyspace_counts(ks), counted(&store, &[ks]));
        assert_eq!(store.load_bytes(), before.bytes);
        // More writes, then a crash: the store is dropped without `close`,
        // so the record read at this open must not be trusted again.
        fill(&store, ks, 300..400, 1).await;
        delete(&store, 300..310).await;
        store.sync().await.unwrap();
        counted(&store, &[ks])
    };
    let store = open_sled(dir.path());
    assert_eq!(store.keyspace_counts(ks), after_crash);
    assert_eq!((after_crash.keys, after_crash.tombstones), (400, 50));
    assert!(after_crash.bytes > before.bytes);
}

#[tokio::test]
async fn purging_everything_brings_the_load_to_zero_though_the_files_do_not_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_sled(dir.path());
    let ks = KeyspaceId::random();
    fill(&store, ks, 0..500, 1).await;
    let full = store.load_bytes();
    for n in 0..500 {
        let tombstone = Cell::deletion(Timestamp(2), Timestamp(2));
        store
            .apply(ks, format!("k{n}").as_bytes(), tombstone)
            .await
            .unwrap();
    }
    let tombstones = store.load_bytes();
    assert!(
        tombstones > 0 && tombstones < full / 20,
        "{tombstones} of {full}"
    );
    let whole = TokenRange::new(Token::MIN, Token::MIN);
    let cells: Vec<(Vec<u8>, Cell)> = store
        .scan(ks, whole)
        .unwrap()
        .map(|entry| {
            let (_, key, cell) = entry.unwrap();
            (key, cell)
        })
        .collect();
    assert_eq!(store.purge_unchanged(ks, cells).await.unwrap(), 500);
    assert_eq!(store.load_bytes(), 0);
    assert!(store.disk_bytes().unwrap() > 0);
    store.close().await.unwrap();
}
