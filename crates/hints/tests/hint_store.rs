//! The hint store over real engine trees: the cap, expiry, deletion only on
//! acknowledgement, truncation, corruption, and surviving restarts.

mod support;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use ringstore_hints::{HintCounters, HintLimits, HintStore, TargetStats, Undeliverable};
use ringstore_storage::{Engine, HINTS_TREE, SledEngine, SledOptions, Timestamp, Tree};
use support::{EPOCH, hint, host, memory_tree, ts};

const DAY: Duration = Duration::from_secs(86_400);
const UNLIMITED: HintLimits = HintLimits {
    max_bytes_per_target: u64::MAX,
};

/// Per-target stats recomputed from the tree itself.
fn scan_stats(tree: &Arc<dyn Tree>) -> BTreeMap<ringstore_placement::HostId, TargetStats> {
    let mut stats = BTreeMap::new();
    for entry in tree.range(Bound::Unbounded, Bound::Unbounded) {
        let (_, value) = entry.unwrap();
        let hint = ringstore_hints::Hint::decode(&value).unwrap();
        let target: &mut TargetStats = stats.entry(hint.target).or_default();
        target.hints += 1;
        target.bytes += value.len() as u64;
    }
    stats
}

#[test]
fn a_targets_hints_come_back_oldest_first_whatever_the_order_they_were_stored_in() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    for (n, age) in [(0, 5), (1, 1), (2, 3), (3, 2), (4, 4)] {
        store
            .store(&hint(host(1), Timestamp(EPOCH.0 - age), n, 10))
            .unwrap();
        store
            .store(&hint(host(2), Timestamp(EPOCH.0 - age), n, 10))
            .unwrap();
    }
    let batch = store.next_batch(host(1), u64::MAX, EPOCH, |_| DAY).unwrap();
    let keys: Vec<_> = batch
        .iter()
        .map(|(_, h)| String::from_utf8(h.key.clone()).unwrap())
        .collect();
    assert_eq!(keys, ["key-0", "key-4", "key-2", "key-3", "key-1"]);
    assert!(
        batch
            .iter()
            .all(|(id, h)| id.target() == host(1) && h.target == host(1))
    );
}

#[test]
fn a_batch_stays_within_its_byte_budget_but_always_holds_at_least_one_hint() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    for n in 0..10 {
        store.store(&hint(host(1), EPOCH, n, 1000)).unwrap();
    }
    let size = hint(host(1), EPOCH, 0, 1000).size_bytes();
    assert_eq!(
        store
            .next_batch(host(1), 3 * size + size / 2, EPOCH, |_| DAY)
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        store
            .next_batch(host(1), 3 * size, EPOCH, |_| DAY)
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        store.next_batch(host(1), 1, EPOCH, |_| DAY).unwrap().len(),
        1
    );
    assert_eq!(
        store.next_batch(host(1), 0, EPOCH, |_| DAY).unwrap().len(),
        1
    );
    assert!(
        store
            .next_batch(host(9), 1, EPOCH, |_| DAY)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn hints_are_deleted_only_once_the_target_acknowledged_them() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    for n in 0..4 {
        store.store(&hint(host(1), EPOCH, n, 100)).unwrap();
    }
    let batch = store.next_batch(host(1), u64::MAX, EPOCH, |_| DAY).unwrap();
    // Delivery failed: nothing is deleted, and the same batch comes back.
    assert_eq!(store.pending()[&host(1)].hints, 4);
    assert_eq!(
        store.next_batch(host(1), u64::MAX, EPOCH, |_| DAY).unwrap(),
        batch
    );
    // Acknowledged: now they go, counted as replayed; a repeated ack is a no-op.
    let ids: Vec<_> = batch.iter().map(|(id, _)| *id).collect();
    assert_eq!(store.delete(&ids).unwrap(), 4);
    assert_eq!(store.delete(&ids).unwrap(), 0);
    assert!(!store.has_hints(host(1)));
    assert!(store.pending().is_empty());
    assert_eq!(store.counters().replayed, 4);
}

#[test]
fn the_cap_drops_the_targets_oldest_hints_and_counts_them() {
    let size = hint(host(1), EPOCH, 0, 100).size_bytes();
    let store = HintStore::open(
        memory_tree(),
        HintLimits {
            max_bytes_per_target: 3 * size,
        },
    )
    .unwrap();
    for n in 0..3 {
        let outcome = store
            .store(&hint(host(1), Timestamp(EPOCH.0 + n as i64), n, 100))
            .unwrap();
        assert!(outcome.stored() && outcome.dropped_oldest == 0);
    }
    store.store(&hint(host(2), EPOCH, 99, 100)).unwrap();
    let outcome = store
        .store(&hint(host(1), Timestamp(EPOCH.0 + 10), 3, 100))
        .unwrap();
    assert!(outcome.stored());
    assert_eq!(outcome.dropped_oldest, 1);
    // A bigger hint needs two evictions.
    let big = hint(host(1), Timestamp(EPOCH.0 + 11), 4, 100 + size as usize);
    assert_eq!(store.store(&big).unwrap().dropped_oldest, 2);
    let left: Vec<_> = store
        .next_batch(host(1), u64::MAX, EPOCH, |_| DAY)
        .unwrap()
        .into_iter()
        .map(|(_, h)| h.key)
        .collect();
    assert_eq!(left, [b"key-3".to_vec(), b"key-4".to_vec()]);
    assert_eq!(
        store.pending()[&host(2)].hints,
        1,
        "other targets are untouched"
    );
    assert!(store.pending()[&host(1)].bytes <= 3 * size);
    assert_eq!(store.counters().dropped_over_cap, 3);
}

#[test]
fn a_hint_bigger_than_the_cap_alone_is_dropped_without_evicting_anything() {
    let store = HintStore::open(
        memory_tree(),
        HintLimits {
            max_bytes_per_target: 1000,
        },
    )
    .unwrap();
    store.store(&hint(host(1), EPOCH, 0, 10)).unwrap();
    let outcome = store.store(&hint(host(1), EPOCH, 1, 2000)).unwrap();
    assert!(!outcome.stored());
    assert_eq!(outcome.dropped_oldest, 0);
    assert_eq!(store.pending()[&host(1)].hints, 1);
    assert_eq!(store.counters().dropped_over_cap, 1);
}

#[test]
fn hints_older_than_max_age_are_never_returned_but_deleted_and_counted() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    let now = ts(10 * DAY);
    let max_age = DAY;
    // Just past, exactly at, and inside the limit.
    let past = Timestamp(now.0 - max_age.as_micros() as i64 - 1);
    let at = Timestamp(now.0 - max_age.as_micros() as i64);
    store.store(&hint(host(1), past, 0, 10)).unwrap();
    store
        .store(&hint(host(1), Timestamp(past.0 - 1_000_000), 1, 10))
        .unwrap();
    store.store(&hint(host(1), at, 2, 10)).unwrap();
    store.store(&hint(host(1), now, 3, 10)).unwrap();
    let batch = store
        .next_batch(host(1), u64::MAX, now, |_| max_age)
        .unwrap();
    let keys: Vec<_> = batch.iter().map(|(_, h)| h.key.clone()).collect();
    assert_eq!(keys, [b"key-2".to_vec(), b"key-3".to_vec()]);
    assert!(
        batch
            .iter()
            .all(|(_, h)| now.0 - h.created_at.0 <= max_age.as_micros() as i64)
    );
    assert_eq!(store.counters().dropped_expired, 2);
    assert_eq!(store.pending()[&host(1)].hints, 2);
    // Even a one-byte budget skips the expired ones rather than returning one.
    store.store(&hint(host(1), past, 4, 10)).unwrap();
    let batch = store.next_batch(host(1), 1, now, |_| max_age).unwrap();
    assert_eq!(batch[0].1.key, b"key-2");
}

#[test]
fn truncate_removes_one_targets_hints_or_everyones() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    for n in 0..3 {
        for t in 1..=3 {
            store.store(&hint(host(t), EPOCH, n, 10)).unwrap();
        }
    }
    assert_eq!(store.truncate(Some(host(2))).unwrap(), 3);
    assert!(!store.has_hints(host(2)) && store.has_hints(host(1)));
    assert_eq!(store.truncate(None).unwrap(), 6);
    assert!(store.pending().is_empty());
    assert_eq!(store.counters().truncated, 9);
}

#[test]
fn hints_and_their_accounting_survive_reopening_the_store() {
    let tree = memory_tree();
    let store = HintStore::open(Arc::clone(&tree), UNLIMITED).unwrap();
    let mut stored = Vec::new();
    for n in 0..5 {
        stored.push(
            store
                .store(&hint(host(n as u128 % 2), EPOCH, n, 50))
                .unwrap()
                .id
                .unwrap(),
        );
    }
    let pending = store.pending();
    drop(store);

    let reopened = HintStore::open(Arc::clone(&tree), UNLIMITED).unwrap();
    assert_eq!(reopened.pending(), pending);
    assert_eq!(reopened.counters(), HintCounters::default());
    // New hints never reuse an old id.
    let new = reopened
        .store(&hint(host(0), EPOCH, 9, 50))
        .unwrap()
        .id
        .unwrap();
    assert!(stored.iter().all(|old| old.sequence() < new.sequence()));
    assert_eq!(reopened.pending()[&host(0)].hints, 4);
}

#[test]
fn hints_survive_a_restart_on_sled() {
    let dir = tempfile::tempdir().unwrap();
    let pending = {
        let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
        let store = HintStore::open(engine.open_tree(HINTS_TREE).unwrap(), UNLIMITED).unwrap();
        for n in 0..20 {
            store
                .store(&hint(
                    host(n as u128 % 3),
                    Timestamp(EPOCH.0 + n as i64),
                    n,
                    200,
                ))
                .unwrap();
        }
        engine.flush().unwrap();
        store.pending()
    };
    let engine = SledEngine::open(dir.path(), SledOptions::small()).unwrap();
    let tree = engine.open_tree(HINTS_TREE).unwrap();
    let store = HintStore::open(Arc::clone(&tree), UNLIMITED).unwrap();
    assert_eq!(store.pending(), pending);
    assert_eq!(scan_stats(&tree), pending);
    let batch = store.next_batch(host(1), u64::MAX, EPOCH, |_| DAY).unwrap();
    assert_eq!(batch.len(), 7);
    assert!(batch.windows(2).all(|w| w[0].0 < w[1].0));
}

#[test]
fn corrupt_entries_are_deleted_and_counted_rather_than_stopping_replay() {
    let tree = memory_tree();
    let store = HintStore::open(Arc::clone(&tree), UNLIMITED).unwrap();
    let good = store
        .store(&hint(host(1), EPOCH, 0, 10))
        .unwrap()
        .id
        .unwrap();
    let bad = store
        .store(&hint(host(1), Timestamp(EPOCH.0 - 1), 1, 10))
        .unwrap()
        .id
        .unwrap();
    // Garble the older hint's value, and add a key that is no hint key.
    let bad_key = tree
        .range(Bound::Unbounded, Bound::Unbounded)
        .map(|e| e.unwrap().0)
        .find(|k| k[24..] == bad.sequence().to_be_bytes())
        .unwrap();
    tree.insert(&bad_key, &[1, 2, 3]).unwrap();
    tree.insert(b"junk", b"junk").unwrap();

    let batch = store.next_batch(host(1), u64::MAX, EPOCH, |_| DAY).unwrap();
    assert_eq!(batch.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [good]);
    assert_eq!(store.counters().dropped_corrupt, 1);
    assert_eq!(store.pending()[&host(1)].hints, 1);

    let reopened = HintStore::open(Arc::clone(&tree), UNLIMITED).unwrap();
    assert_eq!(
        reopened.counters().dropped_corrupt,
        1,
        "the junk key goes on open"
    );
    assert_eq!(tree.len().unwrap(), 1);
}

#[test]
fn concurrent_stores_and_deletes_leave_the_accounting_equal_to_the_tree() {
    let tree = memory_tree();
    let store = HintStore::open(
        Arc::clone(&tree),
        HintLimits {
            max_bytes_per_target: 20_000,
        },
    )
    .unwrap();
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let store = &store;
            scope.spawn(move || {
                for n in 0..200 {
                    let target = host(u128::from(n % 3));
                    store
                        .store(&hint(
                            target,
                            Timestamp(EPOCH.0 + n as i64),
                            thread * 1000 + n,
                            300,
                        ))
                        .unwrap();
                    if n % 5 == 0 {
                        let batch = store.next_batch(target, 1000, EPOCH, |_| DAY).unwrap();
                        let ids: Vec<_> = batch.iter().map(|(id, _)| *id).collect();
                        store.delete(&ids).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(store.pending(), scan_stats(&tree));
    let counters = store.counters();
    let left: u64 = store.pending().values().map(|s| s.hints).sum();
    assert_eq!(counters.stored, 800);
    assert_eq!(
        counters.stored,
        left + counters.replayed + counters.dropped_over_cap
    );
}

#[test]
fn declined_hints_are_counted_as_outside_the_window() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    store.note_outside_window();
    store.note_outside_window();
    assert_eq!(store.counters().dropped_outside_window, 2);
}

#[test]
fn each_keyspace_has_its_own_gc_grace() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    let now = ts(10 * DAY);
    let two_hours_ago = Timestamp(now.0 - 7_200_000_000);
    let short_lived = ringstore_cell::KeyspaceId::random();
    let mut expired = hint(host(1), two_hours_ago, 0, 10);
    expired.keyspace = short_lived;
    store.store(&expired).unwrap();
    store.store(&hint(host(1), two_hours_ago, 1, 10)).unwrap();
    // One keyspace keeps hints an hour, the other a day.
    let gc_grace = |ks| {
        if ks == short_lived {
            Duration::from_secs(3600)
        } else {
            DAY
        }
    };
    let batch = store.next_batch(host(1), u64::MAX, now, gc_grace).unwrap();
    let keys: Vec<_> = batch.iter().map(|(_, h)| h.key.clone()).collect();
    assert_eq!(keys, [b"key-1".to_vec()]);
    assert_eq!(store.counters().dropped_expired, 1);
}

#[test]
fn the_oldest_pending_hint_of_a_target_survives_reopening_the_store() {
    let tree = memory_tree();
    let store = HintStore::open(Arc::clone(&tree), UNLIMITED).unwrap();
    assert_eq!(store.oldest_hint(host(1)).unwrap(), None);
    // Stored out of order: the oldest is the one created first, not stored first.
    store.store(&hint(host(1), ts(2 * DAY), 0, 10)).unwrap();
    let oldest = store.store(&hint(host(1), ts(DAY), 1, 10)).unwrap();
    store
        .store(&hint(host(2), ts(Duration::ZERO), 2, 10))
        .unwrap();
    drop(store);

    let reopened = HintStore::open(Arc::clone(&tree), UNLIMITED).unwrap();
    assert_eq!(reopened.oldest_hint(host(1)).unwrap(), Some(ts(DAY)));
    reopened.delete(&[oldest.id.unwrap()]).unwrap();
    assert_eq!(reopened.oldest_hint(host(1)).unwrap(), Some(ts(2 * DAY)));
    assert_eq!(reopened.oldest_hint(host(3)).unwrap(), None);
}

#[test]
fn undeliverable_hints_are_discarded_and_counted_by_reason() {
    let store = HintStore::open(memory_tree(), UNLIMITED).unwrap();
    let ids: Vec<_> = (0..3)
        .map(|n| {
            store
                .store(&hint(host(1), EPOCH, n, 10))
                .unwrap()
                .id
                .unwrap()
        })
        .collect();
    assert_eq!(
        store
            .discard(&ids[..2], Undeliverable::KeyspaceDropped)
            .unwrap(),
        2
    );
    assert_eq!(store.discard(&ids[2..], Undeliverable::Refused).unwrap(), 1);
    // Already gone: not counted twice.
    assert_eq!(store.discard(&ids, Undeliverable::Refused).unwrap(), 0);
    let counters = store.counters();
    assert_eq!(
        (counters.dropped_keyspace, counters.dropped_refused),
        (2, 1)
    );
    assert_eq!(counters.replayed, 0);
    assert!(!store.has_hints(host(1)));
}
