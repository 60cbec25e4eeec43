//! Fuzzing the storage decoders with proptest: arbitrary bytes, and valid
//! encodings mutated (truncated, bit-flipped, extended, fields set huge).
//!
//! Properties: decoding never panics, and whatever decodes re-encodes to the
//! very bytes it came from (one encoding per value, so a corrupt cell cannot
//! pass as a different one and be "repaired" into something else).
//! The data-key decoder is crate-private: its fuzz test is in `key_encoding.rs`.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test -p ringstore-storage --test fuzz_decoders`.

use proptest::prelude::*;
use ringstore_storage::{Cell, DataTree, KeyspaceId, StorageError, Timestamp};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

fn any_cell() -> impl Strategy<Value = Cell> {
    (
        any::<i64>(),
        proptest::option::of(any::<i64>()),
        proptest::option::of(bytes(64)),
    )
        .prop_map(|(timestamp, expires_at, value)| Cell {
            timestamp: Timestamp(timestamp),
            expires_at: expires_at.map(Timestamp),
            value,
        })
}

/// A valid encoding damaged one way: truncated, a bit flipped, garbage
/// appended, or a run of bytes overwritten with 0xff.
fn mutated(valid: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = valid.len().max(1);
    (0usize..4, 0..len, 0u8..8, bytes(32)).prop_map(move |(how, at, bit, extra)| {
        let mut data = valid.clone();
        match how {
            0 => data.truncate(at),
            1 if !data.is_empty() => data[at] ^= 1 << bit,
            2 => data.extend_from_slice(&extra),
            _ => {
                let end = (at + 8).min(data.len());
                if at < end {
                    data[at..end].fill(0xff);
                }
            }
        }
        data
    })
}

/// Whatever decodes re-encodes, in the format it came in (format 1, an
/// earlier build's, is `canonical_bytes`), to the very bytes it came from.
fn assert_decodes_canonically(bytes: &[u8]) -> Result<(), TestCaseError> {
    match Cell::decode(bytes) {
        Ok(cell) if bytes[0] == 1 => prop_assert_eq!(cell.canonical_bytes(), bytes),
        Ok(cell) => prop_assert_eq!(cell.encode(), bytes),
        Err(damage) => prop_assert!(
            StorageError::from(damage.clone()).is_corruption(),
            "{damage:?}"
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn arbitrary_bytes_decode_as_a_cell_that_re_encodes_to_them_or_as_an_error(
        bytes in bytes(80),
    ) {
        assert_decodes_canonically(&bytes)?;
    }

    #[test]
    fn mutated_cells_decode_canonically_or_are_refused(
        damaged in any_cell().prop_flat_map(|cell| mutated(cell.encode())),
    ) {
        assert_decodes_canonically(&damaged)?;
    }

    #[test]
    fn mutated_cells_of_the_old_format_decode_canonically_or_are_refused(
        damaged in any_cell().prop_flat_map(|cell| mutated(cell.canonical_bytes())),
    ) {
        assert_decodes_canonically(&damaged)?;
    }

    /// The new format's CRC: no stored cell with one or two bits flipped
    /// reads back (CRC-32 catches every error of up to three bits in
    /// messages this short; two flips that turn the format byte 2 into 1
    /// would not be caught, and cannot happen with one flip).
    #[test]
    fn a_stored_cell_with_a_flipped_bit_or_two_never_reads_back(
        cell in any_cell(),
        first in any::<usize>(),
        second in proptest::option::of(any::<usize>()),
    ) {
        let good = cell.encode();
        let bits = good.len() * 8;
        let mut flipped = good.clone();
        let (first, second) = (first % bits, second.map(|b| b % bits).filter(|&b| b != first % bits));
        for bit in std::iter::once(first).chain(second) {
            flipped[bit / 8] ^= 1 << (bit % 8);
        }
        prop_assume!(flipped[0] != 1);
        prop_assert!(Cell::decode(&flipped).is_err());
    }

    #[test]
    fn arbitrary_text_parses_as_a_keyspace_id_that_prints_back_or_is_refused(
        text in prop_oneof![
            any::<String>(),
            "[0-9a-fA-F-]{30,40}",
            any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).to_string()),
        ],
    ) {
        match text.parse::<KeyspaceId>() {
            Ok(id) => {
                prop_assert_eq!(id.to_string().parse::<KeyspaceId>().unwrap(), id);
                prop_assert_eq!(KeyspaceId::from_data_tree_name(&id.data_tree_name()), Some(id));
            }
            Err(error) => prop_assert_eq!(&error.text, &text),
        }
        let _ = KeyspaceId::from_data_tree_name(&text);
        let _ = KeyspaceId::from_data_tree_name(&format!("data/{text}"));
    }
}

#[test]
fn a_cell_with_both_flags_is_an_expiring_tombstone_and_round_trips() {
    let bytes = Cell {
        timestamp: Timestamp(1),
        expires_at: Some(Timestamp(2)),
        value: None,
    }
    .encode();
    assert_eq!(bytes[1], 3);
    assert_eq!(Cell::decode(&bytes).unwrap().encode(), bytes);
}
