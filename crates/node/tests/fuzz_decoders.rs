//! Fuzzing what the node decodes from the wire and from its system tree, with
//! proptest: arbitrary bytes decoded as every internode and schema message and
//! run through the wire→domain conversions; arbitrary (hostile but
//! well-formed) messages built field by field; stream chunks damaged in
//! flight; and a corrupt persisted schema or stream checkpoint.
//!
//! Properties: nothing panics; a conversion either refuses with
//! `InvalidArgument` or yields a value whose wire form converts back to it;
//! corrupt persisted state is an error on load, never a panic; a damaged
//! stream chunk is caught by its checksum.
//!
//! Stream chunks and checkpoints are reached through their current paths,
//! `ringstore_node::streaming::{chunk, checkpoint}`.
//!
//! More cases: `PROPTEST_CASES=100000 cargo test -p ringstore-node --test fuzz_decoders`.

use std::sync::Arc;

use proptest::prelude::*;
use prost::Message;
use ringstore_node::convert::range_from_pb;
use ringstore_node::convert::{
    cell_from_pb, cell_to_pb, keyspace_id_from_pb, strategy_from_pb, strategy_to_pb,
};
use ringstore_node::error::NodeError;
use ringstore_node::schema::Schema;
use ringstore_node::schema::store::{SchemaStore, snapshot_of};
use ringstore_node::schema::wire::{
    keyspace_from_pb, keyspace_to_pb, schema_entry_from_pb, schema_entry_to_pb,
};
use ringstore_placement::{Token, TokenRange};
use ringstore_proto::v1 as pb;
use ringstore_storage::{Cell, Durability, KeyspaceId, MemoryEngine, Store};
use ringstore_streaming::{Checkpoints, StreamOperation};
use ringstore_streaming::{Chunker, EntryChecksum};

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

/// A valid encoding damaged one way: truncated, a bit flipped, garbage
/// appended, or a run overwritten with 0xff (a varint length set huge).
fn mutated(valid: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = valid.len().max(1);
    (0usize..4, 0..len, 0u8..8, bytes(32)).prop_map(move |(how, at, bit, extra)| {
        let mut data = valid.clone();
        match how {
            0 => data.truncate(at),
            1 if !data.is_empty() => data[at] ^= 1 << bit,
            2 => data.extend_from_slice(&extra),
            _ => {
                let end = (at + 10).min(data.len());
                if at < end {
                    data[at..end].fill(0xff);
                }
            }
        }
        data
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        Just(String::new()),
        Just(" ".to_string()),
        "[a-z0-9_]{1,12}",
        any::<u128>().prop_map(|n| uuid::Uuid::from_u128(n).to_string()),
    ]
}

fn pb_cell() -> impl Strategy<Value = pb::Cell> {
    (
        any::<i64>(),
        proptest::option::of(any::<i64>()),
        proptest::option::of(bytes(32)),
    )
        .prop_map(|(timestamp_micros, expires_at_micros, value)| pb::Cell {
            timestamp_micros,
            expires_at_micros,
            value,
        })
}

fn rf() -> impl Strategy<Value = u32> {
    prop_oneof![0u32..6, any::<u32>(), Just(u32::MAX)]
}

fn pb_replication() -> impl Strategy<Value = Option<pb::Replication>> {
    use pb::replication::Strategy as S;
    let strategy = prop_oneof![
        rf().prop_map(|replication_factor| S::Simple(pb::SimpleStrategy { replication_factor })),
        proptest::collection::hash_map(text(), rf(), 0..4).prop_map(|replication_factors| {
            S::NetworkTopology(pb::NetworkTopologyStrategy {
                replication_factors,
            })
        }),
    ];
    proptest::option::of(
        proptest::option::of(strategy).prop_map(|strategy| pb::Replication { strategy }),
    )
}

fn pb_keyspace() -> impl Strategy<Value = pb::Keyspace> {
    (
        text(),
        text(),
        pb_replication(),
        proptest::option::of(any::<u32>()),
        proptest::option::of(prop_oneof![
            text(),
            Just("p99".to_string()),
            Just("20ms".to_string())
        ]),
        pb_replication(),
    )
        .prop_map(
            |(name, id, replication, gc_grace_seconds, speculative_retry, pending_replication)| {
                pb::Keyspace {
                    name,
                    id,
                    replication,
                    gc_grace_seconds,
                    speculative_retry,
                    pending_replication,
                }
            },
        )
}

fn pb_schema_entry() -> impl Strategy<Value = pb::SchemaEntry> {
    (
        proptest::option::of(pb_keyspace()),
        any::<i64>(),
        any::<bool>(),
    )
        .prop_map(|(keyspace, timestamp_micros, dropped)| pb::SchemaEntry {
            keyspace,
            timestamp_micros,
            dropped,
        })
}

fn is_invalid_argument(error: &NodeError) -> bool {
    error.code() == tonic::Code::InvalidArgument
}

/// Runs every wire→domain conversion the node applies to `bytes` decoded as
/// each request type it serves. Only checks that nothing panics and that
/// refusals are `InvalidArgument`.
fn decode_and_convert_everything(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(snapshot) = pb::SchemaSnapshot::decode(bytes) {
        let mut schema = Schema::default();
        for entry in snapshot.entries {
            match schema_entry_from_pb(entry) {
                Ok(entry) => {
                    schema.merge_entry(entry);
                }
                Err(error) => prop_assert!(is_invalid_argument(&error), "{error:?}"),
            }
        }
        let _ = schema.version();
        let _ = snapshot_of(&schema).encode_to_vec();
    }
    if let Ok(apply) = pb::ApplyRequest::decode(bytes) {
        for mutation in apply.mutations {
            let _ = keyspace_id_from_pb(&mutation.keyspace_id);
            if let Some(cell) = mutation.cell {
                let _ = cell_from_pb(cell).encode();
            }
        }
    }
    if let Ok(read) = pb::ReadRequest::decode(bytes) {
        let _ = keyspace_id_from_pb(&read.keyspace_id);
    }
    if let Ok(request) = pb::StreamRangeRequest::decode(bytes) {
        let _ = keyspace_id_from_pb(&request.keyspace_id);
        let _ = range_from_pb(request.range).map(|r| r.to_inclusive_pieces());
    }
    if let Ok(request) = pb::FetchRangesRequest::decode(bytes) {
        for fetch in request.ranges {
            let _ = keyspace_id_from_pb(&fetch.keyspace_id);
            let _ = range_from_pb(fetch.range).map(|r| r.to_inclusive_pieces());
        }
    }
    if let Ok(request) = pb::RangeStatsRequest::decode(bytes) {
        for range in request.ranges {
            let _ = range_from_pb(Some(range)).map(|r| r.to_inclusive_pieces());
        }
    }
    if let Ok(request) = pb::TakeHintsRequest::decode(bytes) {
        for hint in request.hints {
            let _ = keyspace_id_from_pb(&hint.keyspace_id);
            if let Some(cell) = hint.cell {
                let _ = cell_from_pb(cell).encode();
            }
        }
    }
    if let Ok(request) = pb::CreateKeyspaceRequest::decode(bytes)
        && let Err(error) = strategy_from_pb(request.replication)
    {
        prop_assert!(is_invalid_argument(&error), "{error:?}");
    }
    if let Ok(chunk) = pb::StreamChunk::decode(bytes) {
        let _ = verify_chunk(chunk);
    }
    // The rest carry only strings, numbers and flags: decoding must not panic.
    let _ = pb::PutRequest::decode(bytes);
    let _ = pb::GetRequest::decode(bytes);
    let _ = pb::DeleteRequest::decode(bytes);
    let _ = pb::BatchRequest::decode(bytes);
    let _ = pb::MetadataSeenRequest::decode(bytes);
    let _ = pb::DropKeyspaceRequest::decode(bytes);
    let _ = pb::SetHandoffRequest::decode(bytes);
    let _ = pb::TruncateHintsRequest::decode(bytes);
    let _ = pb::GetEndpointsRequest::decode(bytes);
    let _ = pb::DecommissionRequest::decode(bytes);
    let _ = pb::RemoveNodeRequest::decode(bytes);
    let _ = pb::CleanupRequest::decode(bytes);
    let _ = pb::SetStreamThroughputRequest::decode(bytes);
    let _ = pb::PlanRequest::decode(bytes);
    Ok(())
}

/// What a receiver does with a chunk before it stores it (as
/// `streaming::fetch` does): each entry's cell converted and encoded once, the
/// chunk's CRC checked. The verified entries, or `None` on a mismatch.
fn verify_chunk(chunk: pb::StreamChunk) -> Option<Vec<(Vec<u8>, Cell)>> {
    let mut sum = EntryChecksum::default();
    let mut entries = Vec::new();
    for entry in chunk.entries {
        let Some(cell) = entry.cell.map(cell_from_pb) else {
            continue;
        };
        sum.add(&entry.key, &cell.canonical_bytes());
        entries.push((entry.key, cell));
    }
    (sum.value() == chunk.checksum).then_some(entries)
}

/// A chunk as a source sends it: entries in token order, with its CRC.
fn sent_chunk() -> impl Strategy<Value = (Vec<(Vec<u8>, Cell)>, pb::StreamChunk)> {
    proptest::collection::vec((any::<i64>(), bytes(12), pb_cell()), 1..8).prop_map(|entries| {
        let mut chunker = Chunker::new(u64::MAX);
        let mut sorted = entries;
        sorted.sort_by_key(|(token, _, _)| *token);
        for (token, key, cell) in sorted {
            chunker.push(Token(token), key, cell_from_pb(cell));
        }
        let chunk = chunker.finish().expect("entries were pushed");
        let wire = pb::StreamChunk {
            entries: chunk
                .entries
                .iter()
                .map(|(key, cell)| pb::StreamEntry {
                    key: key.clone(),
                    cell: Some(cell_to_pb(cell)),
                })
                .collect(),
            checksum: chunk.checksum,
            last_token: chunk.last_token.0,
            last: false,
            total_entries: 0,
            total_checksum: 0,
        };
        (chunk.entries, wire)
    })
}

fn store() -> Store {
    Store::open(Arc::new(MemoryEngine::new()), Durability::Batch).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_as_any_request_never_panic_a_conversion(bytes in bytes(256)) {
        decode_and_convert_everything(&bytes)?;
    }

    #[test]
    fn mutated_schema_snapshots_never_panic_a_conversion(
        damaged in proptest::collection::vec(pb_schema_entry(), 0..4)
            .prop_flat_map(|entries| mutated(pb::SchemaSnapshot { entries }.encode_to_vec())),
    ) {
        decode_and_convert_everything(&damaged)?;
    }

    #[test]
    fn cells_convert_both_ways_unchanged(cell in pb_cell()) {
        let domain = cell_from_pb(cell.clone());
        prop_assert_eq!(cell_to_pb(&domain), cell);
        prop_assert_eq!(Cell::decode(&domain.encode()).unwrap(), domain);
    }

    #[test]
    fn a_strategy_is_refused_clearly_or_converts_back_to_itself(replication in pb_replication()) {
        match strategy_from_pb(replication) {
            Ok(strategy) => {
                prop_assert_eq!(strategy_from_pb(Some(strategy_to_pb(&strategy))).unwrap(), strategy.clone());
                let _ = strategy.total_rf();
                let _ = strategy.to_string();
            }
            Err(error) => prop_assert!(is_invalid_argument(&error), "{error:?}"),
        }
    }

    #[test]
    fn a_schema_entry_is_refused_clearly_or_converts_back_to_itself(entry in pb_schema_entry()) {
        match schema_entry_from_pb(entry) {
            Ok(domain) => {
                let again = schema_entry_from_pb(schema_entry_to_pb(&domain)).unwrap();
                prop_assert_eq!(&again, &domain);
                let keyspace = keyspace_from_pb(keyspace_to_pb(&domain.keyspace)).unwrap();
                prop_assert_eq!(keyspace, domain.keyspace.clone());
                let mut schema = Schema::default();
                schema.merge_entry(domain);
                let _ = schema.version();
            }
            Err(error) => prop_assert!(is_invalid_argument(&error), "{error:?}"),
        }
    }

    #[test]
    fn a_damaged_stream_chunk_is_refused_or_carries_what_was_sent(
        (sent, damaged) in sent_chunk().prop_flat_map(|(sent, wire)| {
            (Just(sent), mutated(wire.encode_to_vec()))
        }),
    ) {
        // A CRC-32 catches the bit flips, truncations and overwrites a
        // damaged message shows: whatever still verifies is exactly what the
        // source sent, or nothing at all (a chunk cut before its checksum
        // field reads as an empty chunk with checksum 0, which is the CRC of
        // no entries; the stream's final count and CRC catch that one).
        if let Ok(chunk) = pb::StreamChunk::decode(&damaged[..])
            && let Some(entries) = verify_chunk(chunk)
        {
            prop_assert!(entries.is_empty() || entries == sent, "{entries:?}");
        }
    }

    #[test]
    fn a_corrupt_persisted_schema_is_an_error_on_load_never_a_panic(
        damaged in prop_oneof![
            bytes(200),
            proptest::collection::vec(pb_schema_entry(), 0..4).prop_flat_map(|entries| {
                let mut persisted = vec![1u8];
                persisted.extend(pb::SchemaSnapshot { entries }.encode_to_vec());
                mutated(persisted)
            }),
        ],
    ) {
        let store = store();
        runtime().block_on(store.meta_put("schema", &damaged)).unwrap();
        if let Ok(schema) = SchemaStore::load(store) {
            let _ = schema.current().version();
        }
    }

    #[test]
    fn corrupt_stream_checkpoints_are_an_error_on_load_never_a_panic(
        damaged in prop_oneof![
            bytes(200),
            (any::<u128>(), any::<(i64, i64, i64)>(), 0u8..3).prop_flat_map(|(ks, (s, e, t), tag)| {
                // One record of the checkpoint format: version 1, then
                // keyspace, range start, range end (LE), tag, token (LE).
                let mut record = vec![1u8];
                record.extend(uuid::Uuid::from_u128(ks).as_bytes());
                record.extend(s.to_le_bytes());
                record.extend(e.to_le_bytes());
                record.push(tag);
                record.extend(t.to_le_bytes());
                mutated(record)
            }),
        ],
    ) {
        let store = store();
        runtime().block_on(store.meta_put("stream:bootstrap", &damaged)).unwrap();
        if let Ok(checkpoints) = Checkpoints::load(&store, StreamOperation::Bootstrap) {
            let range = TokenRange::new(Token(0), Token(1));
            let _ = checkpoints.position(KeyspaceId(uuid::Uuid::nil()), range);
        }
    }
}

#[test]
fn a_persisted_schema_of_an_unknown_format_or_garbage_is_refused() {
    let runtime = runtime();
    for persisted in [&[][..], &[9, 1, 2][..], &[1, 0xff, 0xff, 0xff][..]] {
        let store = store();
        runtime
            .block_on(store.meta_put("schema", persisted))
            .unwrap();
        assert!(SchemaStore::load(store).is_err(), "{persisted:?}");
    }
}

#[test]
fn the_keyspace_id_conversion_refuses_text_that_is_not_a_uuid() {
    for text in ["", "ks", "data/", "{}", "00000000-0000-0000-0000"] {
        let error = keyspace_id_from_pb(text).unwrap_err();
        assert!(is_invalid_argument(&error), "{error:?}");
    }
}
