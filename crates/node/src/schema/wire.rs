//! The schema's wire forms: keyspaces and schema entries as the client
//! and internode messages carry them.
//!
//! Here rather than in `convert`, which holds the wire forms of the types
//! below the schema (strategies, levels, cells, ranges): `convert` must not
//! name the schema, which uses it.

use ringstore_proto::v1 as pb;
use ringstore_storage::Timestamp;

use super::{DEFAULT_GC_GRACE_SECONDS, KeyspaceDef, SchemaEntry};
use crate::convert::{
    keyspace_id_from_pb, speculative_retry_from_pb, strategy_from_pb, strategy_to_pb,
};
use crate::error::{NodeError, SchemaError};

/// A keyspace's wire form.
pub fn keyspace_to_pb(keyspace: &KeyspaceDef) -> pb::Keyspace {
    pb::Keyspace {
        name: keyspace.name.clone(),
        id: keyspace.id.to_string(),
        replication: Some(strategy_to_pb(&keyspace.strategy)),
        gc_grace_seconds: Some(keyspace.gc_grace_seconds),
        speculative_retry: Some(keyspace.speculative_retry.to_string()),
        pending_replication: keyspace.pending_strategy.as_ref().map(strategy_to_pb),
    }
}

/// A keyspace from its wire form.
pub fn keyspace_from_pb(keyspace: pb::Keyspace) -> Result<KeyspaceDef, NodeError> {
    let id = keyspace_id_from_pb(&keyspace.id)?;
    Ok(KeyspaceDef {
        name: keyspace.name,
        id,
        strategy: strategy_from_pb(keyspace.replication)?,
        gc_grace_seconds: keyspace
            .gc_grace_seconds
            .unwrap_or(DEFAULT_GC_GRACE_SECONDS),
        speculative_retry: speculative_retry_from_pb(keyspace.speculative_retry.as_deref())?,
        pending_strategy: keyspace
            .pending_replication
            .map(|pending| strategy_from_pb(Some(pending)))
            .transpose()?,
    })
}

/// A schema entry's wire form.
pub fn schema_entry_to_pb(entry: &SchemaEntry) -> pb::SchemaEntry {
    pb::SchemaEntry {
        keyspace: Some(keyspace_to_pb(&entry.keyspace)),
        timestamp_micros: entry.timestamp.0,
        dropped: entry.dropped,
    }
}

/// A schema entry from its wire form.
pub fn schema_entry_from_pb(entry: pb::SchemaEntry) -> Result<SchemaEntry, NodeError> {
    let keyspace = entry.keyspace.ok_or(SchemaError::EntryWithoutKeyspace)?;
    Ok(SchemaEntry {
        keyspace: keyspace_from_pb(keyspace)?,
        timestamp: Timestamp(entry.timestamp_micros),
        dropped: entry.dropped,
    })
}
