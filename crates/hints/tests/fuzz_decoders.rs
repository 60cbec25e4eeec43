//! Fuzzing the hint decoders with proptest, as the hint store meets them: a
//! hints tree holding arbitrary keys and values, and valid hints damaged
//! (truncated, bit-flipped, extended, the key length set huge).
//!
//! Properties: decoding never panics; what decodes re-encodes to the same
//! bytes; a store opened over garbage answers every query, hands out only
//! hints that decode, and deletes the corrupt entries it meets.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test -p ringstore-hints --test fuzz_decoders`.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use ringstore_hints::{Hint, HintLimits, HintStore};
use ringstore_placement::HostId;
use ringstore_storage::{Cell, Engine, KeyspaceId, MemoryEngine, Timestamp, Tree};
use uuid::Uuid;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn target() -> impl Strategy<Value = HostId> {
    (0u128..3).prop_map(HostId::from_u128)
}

fn any_hint() -> impl Strategy<Value = Hint> {
    (
        target(),
        any::<u128>(),
        bytes(24),
        any::<i64>(),
        proptest::option::of(any::<i64>()),
        proptest::option::of(bytes(24)),
        any::<i64>(),
    )
        .prop_map(|(target, ks, key, ts, exp, value, created)| Hint {
            target,
            keyspace: KeyspaceId(Uuid::from_u128(ks)),
            key,
            cell: Cell {
                timestamp: Timestamp(ts),
                expires_at: exp.map(Timestamp),
                value,
            },
            created_at: Timestamp(created),
        })
}

/// An encoded hint damaged one way (or not at all).
fn damaged_hint() -> impl Strategy<Value = Vec<u8>> {
    (any_hint(), 0usize..5, any::<usize>(), 0u8..8, bytes(16)).prop_map(
        |(hint, how, at, bit, extra)| {
            let mut data = hint.encode();
            let at = at % data.len();
            match how {
                0 => data.truncate(at),
                1 => data[at] ^= 1 << bit,
                2 => data.extend_from_slice(&extra),
                // The key length (bytes 41..45) claims far more than is there.
                3 => data[41..45].copy_from_slice(&u32::MAX.to_be_bytes()),
                _ => {}
            }
            data
        },
    )
}

/// A hints-tree key: arbitrary bytes, or the right length (32) with a
/// target the store is asked about.
fn tree_key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        bytes(40),
        (target(), bytes(16)).prop_map(|(t, rest)| {
            let mut key = t.0.as_bytes().to_vec();
            key.extend(rest.iter().chain(std::iter::repeat(&0)).take(16));
            key
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn damaged_hints_decode_to_what_re_encodes_to_them_or_are_corrupt(bytes in damaged_hint()) {
        match Hint::decode(&bytes) {
            Ok(hint) => prop_assert_eq!(hint.encode(), bytes),
            Err(error) => prop_assert!(error.is_corruption(), "{error:?}"),
        }
    }

    #[test]
    fn a_hint_store_over_a_garbage_tree_answers_and_hands_out_only_sound_hints(
        entries in proptest::collection::vec(
            (tree_key(), prop_oneof![bytes(80), damaged_hint()]),
            0..24,
        ),
    ) {
        let engine = MemoryEngine::new();
        let tree: Arc<dyn Tree> = engine.open_tree("hints").unwrap();
        for (key, value) in &entries {
            tree.insert(key, value).unwrap();
        }
        let store = HintStore::open(tree.clone(), HintLimits::default()).unwrap();
        let _ = store.pending();
        for t in 0..3 {
            let target = HostId::from_u128(t);
            let _ = store.has_hints(target);
            let _ = store.oldest_hint(target).unwrap();
            let batch = store
                .next_batch(target, 1 << 20, Timestamp(0), |_| Duration::MAX)
                .unwrap();
            for (id, hint) in &batch {
                prop_assert_eq!(id.target(), target);
                prop_assert_eq!(hint.target, target);
                prop_assert_eq!(Hint::decode(&hint.encode()).unwrap(), hint.clone());
            }
            store.delete(&batch.iter().map(|(id, _)| *id).collect::<Vec<_>>()).unwrap();
        }
        store.truncate(None).unwrap();
        prop_assert!(store.pending().is_empty());
    }
}
