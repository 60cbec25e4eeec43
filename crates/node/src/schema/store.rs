//! The node's copy of the schema: read from a snapshot, merged and persisted
//! one change at a time.

use std::sync::{Arc, RwLock};

use prost::Message;
use ringstore_proto::v1 as pb;
use ringstore_storage::Store;

use crate::error::{NodeError, Result};
use crate::schema::wire::{schema_entry_from_pb, schema_entry_to_pb};
use crate::schema::{Schema, SchemaEntry};

/// The key of the schema in the storage's system tree.
const SCHEMA_META_KEY: &str = "schema";
/// The first byte of the persisted schema: its format version.
const SCHEMA_FORMAT: u8 = 1;

/// The schema this node holds.
pub struct SchemaStore {
    store: Store,
    /// The current schema, swapped whole; held only to clone or swap the `Arc`.
    current: RwLock<Arc<Schema>>,
    /// Serializes merges, so a merge and its persistence are one step. A tokio
    /// mutex because it is held across the (async, durable) write.
    writer: tokio::sync::Mutex<()>,
}

impl SchemaStore {
    /// Loads the persisted schema (empty if none).
    pub fn load(store: Store) -> Result<SchemaStore> {
        let mut schema = Schema::default();
        if let Some(bytes) = store.meta_get(SCHEMA_META_KEY)? {
            let corrupt = |why: String| NodeError::CorruptRecord {
                record: "the stored schema",
                detail: Some(why),
            };
            let (format, body) = bytes.split_first().ok_or_else(|| corrupt("empty".into()))?;
            if *format != SCHEMA_FORMAT {
                return Err(corrupt(format!("unknown format {format}")));
            }
            let snapshot = pb::SchemaSnapshot::decode(body).map_err(|e| corrupt(e.to_string()))?;
            for entry in snapshot.entries {
                schema
                    .merge_entry(schema_entry_from_pb(entry).map_err(|e| corrupt(e.to_string()))?);
            }
        }
        Ok(SchemaStore {
            store,
            current: RwLock::new(Arc::new(schema)),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    /// The current schema.
    pub fn current(&self) -> Arc<Schema> {
        self.current.read().expect("schema lock").clone()
    }

    /// Merges `entries`; if anything changed, persists the result durably
    /// before making it current. Returns whether it changed.
    pub async fn merge(&self, entries: impl IntoIterator<Item = SchemaEntry>) -> Result<bool> {
        let _writer = self.writer.lock().await;
        let mut schema = Schema::clone(&self.current());
        if !schema.merge(entries) {
            return Ok(false);
        }
        let mut bytes = vec![SCHEMA_FORMAT];
        snapshot_of(&schema)
            .encode(&mut bytes)
            .expect("a Vec grows");
        self.store.meta_put(SCHEMA_META_KEY, &bytes).await?;
        *self.current.write().expect("schema lock") = Arc::new(schema);
        Ok(true)
    }
}

/// The wire form of a whole schema.
pub fn snapshot_of(schema: &Schema) -> pb::SchemaSnapshot {
    pb::SchemaSnapshot {
        entries: schema.entries().map(schema_entry_to_pb).collect(),
    }
}
