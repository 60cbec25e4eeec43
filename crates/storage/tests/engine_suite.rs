//! The engine suite: every check runs against every engine, so the store
//! above can rely on the `Engine` contract rather than on one engine.
//!
//! Each check is a plain function over `&dyn Engine`; `engine_suite!` turns
//! each into one `#[test]` per engine. Durability across reopening only makes
//! sense for sled and is checked separately.

use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::Arc;

use ringstore_storage::{
    Engine, MemoryEngine, SimulatedDisk, SledEngine, SledOptions, StorageError, Tree,
};
use tempfile::TempDir;

/// An engine under test, with whatever it needs kept alive.
struct Fixture {
    engine: Box<dyn Engine>,
    _dir: Option<TempDir>,
}

fn memory() -> Fixture {
    Fixture {
        engine: Box::new(MemoryEngine::new()),
        _dir: None,
    }
}

fn simulated_disk() -> Fixture {
    Fixture {
        engine: Box::new(SimulatedDisk::new()),
        _dir: None,
    }
}

fn sled() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
    Fixture {
        engine: Box::new(engine),
        _dir: Some(dir),
    }
}

macro_rules! engine_suite {
    ($($check:ident),* $(,)?) => {
        mod memory_engine {
            $(#[test] fn $check() { super::$check(&*super::memory().engine) })*
        }
        mod simulated_disk {
            $(#[test] fn $check() { super::$check(&*super::simulated_disk().engine) })*
        }
        mod sled_engine {
            $(#[test] fn $check() { super::$check(&*super::sled().engine) })*
        }
    };
}

engine_suite!(
    get_insert_and_remove_round_trip,
    update_sees_the_current_value_and_none_removes_the_key,
    an_update_expecting_absent_keys_still_sees_a_present_value,
    concurrent_updates_never_lose_an_increment,
    range_scans_honour_every_bound_kind_in_byte_order,
    empty_and_inverted_ranges_yield_nothing,
    long_range_scans_see_every_key_once_in_order,
    trees_are_independent,
    drop_tree_removes_the_data_and_the_name,
    a_handle_to_a_dropped_tree_refuses_operations,
    flush_succeeds_and_size_on_disk_reports_the_data,
);

fn collect(tree: &dyn Tree, from: Bound<&[u8]>, to: Bound<&[u8]>) -> Vec<Vec<u8>> {
    tree.range(from, to).map(|entry| entry.unwrap().0).collect()
}

fn get_insert_and_remove_round_trip(engine: &dyn Engine) {
    let tree = engine.open_tree("t").unwrap();
    assert_eq!(tree.get(b"k").unwrap(), None);
    assert_eq!(tree.insert(b"k", b"v1").unwrap(), None);
    assert_eq!(tree.insert(b"k", b"v2").unwrap(), Some(b"v1".to_vec()));
    assert_eq!(tree.get(b"k").unwrap(), Some(b"v2".to_vec()));
    assert_eq!(tree.len().unwrap(), 1);
    assert!(!tree.is_empty().unwrap());
    assert_eq!(tree.remove(b"k").unwrap(), Some(b"v2".to_vec()));
    assert_eq!(tree.remove(b"k").unwrap(), None);
    assert_eq!(tree.get(b"k").unwrap(), None);
    assert!(tree.is_empty().unwrap());
    // Empty values are values, not absence.
    tree.insert(b"e", b"").unwrap();
    assert_eq!(tree.get(b"e").unwrap(), Some(Vec::new()));
    // A second handle to the same name sees the same data.
    assert_eq!(
        engine.open_tree("t").unwrap().get(b"e").unwrap(),
        Some(Vec::new())
    );
}

fn update_sees_the_current_value_and_none_removes_the_key(engine: &dyn Engine) {
    let tree = engine.open_tree("t").unwrap();
    let mut seen = Vec::new();
    let new = tree
        .update(b"k", &mut |current| {
            seen.push(current.map(<[u8]>::to_vec));
            Some(b"first".to_vec())
        })
        .unwrap();
    assert_eq!(new, Some(b"first".to_vec()));
    assert_eq!(seen.last().unwrap(), &None);
    let new = tree
        .update(b"k", &mut |current| {
            assert_eq!(current, Some(&b"first"[..]));
            None
        })
        .unwrap();
    assert_eq!(new, None);
    assert_eq!(tree.get(b"k").unwrap(), None);
}

fn an_update_expecting_absent_keys_still_sees_a_present_value(engine: &dyn Engine) {
    let tree = engine.open_tree("t").unwrap();
    tree.insert(b"present", b"old").unwrap();
    for (key, expected) in [(&b"present"[..], Some(&b"old"[..])), (b"absent", None)] {
        let mut last_seen = None;
        let new = tree
            .update_expecting_absent(key, &mut |current| {
                last_seen = Some(current.map(<[u8]>::to_vec));
                let mut next = current.unwrap_or(b"none").to_vec();
                next.extend_from_slice(b"+1");
                Some(next)
            })
            .unwrap();
        let expected_new = [expected.unwrap_or(b"none"), b"+1"].concat();
        assert_eq!(last_seen, Some(expected.map(<[u8]>::to_vec)), "{key:?}");
        assert_eq!(new, Some(expected_new.clone()));
        assert_eq!(tree.get(key).unwrap(), Some(expected_new));
    }
}

fn concurrent_updates_never_lose_an_increment(engine: &dyn Engine) {
    const THREADS: u64 = 8;
    const INCREMENTS: u64 = 250;
    let tree: Arc<dyn Tree> = engine.open_tree("counters").unwrap();
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            let tree = Arc::clone(&tree);
            // Half the threads guess "absent" and are wrong after the first
            // increment: the guess must never cost an increment.
            let guess_absent = thread % 2 == 1;
            scope.spawn(move || {
                for _ in 0..INCREMENTS {
                    let mut increment = |current: Option<&[u8]>| {
                        let n = current.map_or(0, |b| u64::from_be_bytes(b.try_into().unwrap()));
                        Some((n + 1).to_be_bytes().to_vec())
                    };
                    if guess_absent {
                        tree.update_expecting_absent(b"n", &mut increment).unwrap();
                    } else {
                        tree.update(b"n", &mut increment).unwrap();
                    }
                }
            });
        }
    });
    let total = u64::from_be_bytes(tree.get(b"n").unwrap().unwrap().try_into().unwrap());
    assert_eq!(total, THREADS * INCREMENTS);
}

fn range_scans_honour_every_bound_kind_in_byte_order(engine: &dyn Engine) {
    let tree = engine.open_tree("t").unwrap();
    // Inserted out of order; byte order puts 0x00 < "a" < "a\0" < "ab" < "b" < 0xff.
    let keys: [&[u8]; 6] = [b"b", b"\xff", b"a", b"ab", b"\x00", b"a\x00"];
    for key in keys {
        tree.insert(key, key).unwrap();
    }
    let all: Vec<Vec<u8>> = [&b"\x00"[..], b"a", b"a\x00", b"ab", b"b", b"\xff"]
        .iter()
        .map(|k| k.to_vec())
        .collect();
    let (a, b): (&[u8], &[u8]) = (b"a", b"b");
    assert_eq!(collect(&*tree, Unbounded, Unbounded), all);
    assert_eq!(collect(&*tree, Included(a), Included(b)), all[1..5]);
    assert_eq!(collect(&*tree, Included(a), Excluded(b)), all[1..4]);
    assert_eq!(collect(&*tree, Excluded(a), Included(b)), all[2..5]);
    assert_eq!(collect(&*tree, Excluded(a), Excluded(b)), all[2..4]);
    assert_eq!(collect(&*tree, Unbounded, Excluded(a)), all[..1]);
    assert_eq!(collect(&*tree, Unbounded, Included(a)), all[..2]);
    assert_eq!(collect(&*tree, Excluded(b), Unbounded), all[5..]);
    assert_eq!(collect(&*tree, Included(b), Unbounded), all[4..]);
    // Bounds need not be keys.
    assert_eq!(collect(&*tree, Included(b"aa"), Excluded(b"c")), all[3..5]);
    // Values come with their keys.
    let entries: Vec<_> = tree
        .range(Unbounded, Unbounded)
        .map(Result::unwrap)
        .collect();
    assert!(entries.iter().all(|(k, v)| k == v));
}

fn empty_and_inverted_ranges_yield_nothing(engine: &dyn Engine) {
    let tree = engine.open_tree("t").unwrap();
    for key in [&b"a"[..], b"b", b"c"] {
        tree.insert(key, b"").unwrap();
    }
    let (a, b, c): (&[u8], &[u8], &[u8]) = (b"a", b"b", b"c");
    assert!(collect(&*tree, Included(c), Included(a)).is_empty());
    assert!(collect(&*tree, Excluded(c), Excluded(a)).is_empty());
    assert!(collect(&*tree, Included(b), Excluded(b)).is_empty());
    assert!(collect(&*tree, Excluded(b), Included(b)).is_empty());
    assert!(collect(&*tree, Excluded(b), Excluded(b)).is_empty());
    assert_eq!(collect(&*tree, Included(b), Included(b)), vec![b.to_vec()]);
    let empty = engine.open_tree("empty").unwrap();
    assert!(collect(&*empty, Unbounded, Unbounded).is_empty());
}

fn long_range_scans_see_every_key_once_in_order(engine: &dyn Engine) {
    let tree = engine.open_tree("t").unwrap();
    let keys: Vec<Vec<u8>> = (0u32..1000)
        .map(|i| (i * 7919 % 1000).to_be_bytes().to_vec())
        .collect();
    for key in &keys {
        tree.insert(key, b"v").unwrap();
    }
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(collect(&*tree, Unbounded, Unbounded), sorted);
    let from = 100u32.to_be_bytes();
    let to = 900u32.to_be_bytes();
    assert_eq!(
        collect(&*tree, Excluded(&from), Included(&to)),
        sorted[101..901]
    );
    assert_eq!(tree.len().unwrap(), 1000);
}

fn trees_are_independent(engine: &dyn Engine) {
    let one = engine.open_tree("one").unwrap();
    let two = engine.open_tree("two").unwrap();
    one.insert(b"k", b"1").unwrap();
    two.insert(b"k", b"2").unwrap();
    two.insert(b"only-two", b"").unwrap();
    assert_eq!(one.get(b"k").unwrap(), Some(b"1".to_vec()));
    assert_eq!(two.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(one.len().unwrap(), 1);
    assert_eq!(collect(&*one, Unbounded, Unbounded), vec![b"k".to_vec()]);
    one.remove(b"k").unwrap();
    assert_eq!(two.get(b"k").unwrap(), Some(b"2".to_vec()));
    assert_eq!(
        engine.tree_names(),
        vec!["one".to_string(), "two".to_string()]
    );
}

fn drop_tree_removes_the_data_and_the_name(engine: &dyn Engine) {
    let doomed = engine.open_tree("data/doomed").unwrap();
    let kept = engine.open_tree("data/kept").unwrap();
    for i in 0u8..50 {
        doomed.insert(&[i], &[i]).unwrap();
        kept.insert(&[i], &[i]).unwrap();
    }
    assert!(engine.drop_tree("data/doomed").unwrap());
    assert!(!engine.drop_tree("data/doomed").unwrap());
    assert!(!engine.drop_tree("never-existed").unwrap());
    assert_eq!(engine.tree_names(), vec!["data/kept".to_string()]);
    let reopened = engine.open_tree("data/doomed").unwrap();
    assert!(reopened.is_empty().unwrap());
    assert_eq!(reopened.get(&[7]).unwrap(), None);
    assert_eq!(kept.len().unwrap(), 50);
}

fn a_handle_to_a_dropped_tree_refuses_operations(engine: &dyn Engine) {
    let stale = engine.open_tree("t").unwrap();
    stale.insert(b"k", b"v").unwrap();
    engine.drop_tree("t").unwrap();
    fn dropped<T>(result: Result<T, StorageError>) -> bool {
        matches!(result, Err(StorageError::TreeDropped { ref name }) if name == "t")
    }
    assert!(dropped(stale.get(b"k")));
    assert!(dropped(stale.insert(b"k", b"v")));
    assert!(dropped(stale.update(b"k", &mut |_| None)));
    let scanned: Vec<_> = stale.range(Unbounded, Unbounded).collect();
    assert_eq!(scanned.len(), 1, "one error, then the scan ends");
    assert!(dropped(scanned.into_iter().next().unwrap()));
}

fn flush_succeeds_and_size_on_disk_reports_the_data(engine: &dyn Engine) {
    let tree = engine.open_tree("t").unwrap();
    for i in 0u32..100 {
        tree.insert(&i.to_be_bytes(), &[0xab; 100]).unwrap();
    }
    engine.flush().unwrap();
    assert!(engine.size_on_disk().unwrap() >= 100 * 100);
}

#[test]
fn sled_keeps_flushed_data_and_dropped_trees_stay_dropped_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
        assert!(!engine.was_recovered());
        let tree = engine.open_tree("data/a").unwrap();
        for i in 0u32..500 {
            tree.insert(&i.to_be_bytes(), &i.to_le_bytes()).unwrap();
        }
        engine
            .open_tree("data/b")
            .unwrap()
            .insert(b"k", b"v")
            .unwrap();
        engine.drop_tree("data/b").unwrap();
        engine.flush().unwrap();
    }
    let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
    assert!(engine.was_recovered());
    assert_eq!(engine.tree_names(), vec!["data/a".to_string()]);
    let tree = engine.open_tree("data/a").unwrap();
    assert_eq!(tree.len().unwrap(), 500);
    assert_eq!(
        tree.get(&7u32.to_be_bytes()).unwrap(),
        Some(7u32.to_le_bytes().to_vec())
    );
    assert!(engine.open_tree("data/b").unwrap().is_empty().unwrap());
}

#[test]
fn sled_refuses_to_drop_its_internal_default_tree() {
    let fixture = sled();
    assert!(fixture.engine.drop_tree("__sled__default").is_err());
    assert!(fixture.engine.tree_names().is_empty());
}

#[test]
fn a_sled_database_closed_in_this_process_can_be_reopened_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0u32..20 {
        let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
        let tree = engine.open_tree("t").unwrap();
        assert_eq!(tree.len().unwrap(), round as usize);
        tree.insert(&round.to_be_bytes(), b"v").unwrap();
        engine.flush().unwrap();
    }
}
