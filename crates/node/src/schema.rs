//! The replicated schema: which keyspaces exist, with which replication.
//!
//! The schema is a map from keyspace name to its latest entry. Entries merge
//! by last-write-wins on their timestamp (on a tie a drop wins, then the
//! greater id), so merging is commutative, associative and idempotent: nodes
//! that exchange schemas in any order end with the same one, and the same
//! version. A dropped keyspace stays as a tombstone entry, so an old copy of
//! it cannot come back; its data is unreachable because a re-created
//! keyspace of the same name gets a new id.

use std::collections::BTreeMap;

use ringstore_placement::{ReplicationStrategy, cassandra_murmur3_x64_128};
use ringstore_storage::{KeyspaceId, Timestamp};

/// A keyspace as the schema defines it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyspaceDef {
    /// Its name: 1 to 48 letters, digits or underscores.
    pub name: String,
    /// Its id, fixed at creation.
    pub id: KeyspaceId,
    /// Its replication.
    pub strategy: ReplicationStrategy,
    /// How old a hint for it may be and still be replayed (seconds).
    pub gc_grace_seconds: u32,
}

/// The `gc_grace_seconds` of a keyspace created without one: 10 days, as
/// Cassandra's default.
pub const DEFAULT_GC_GRACE_SECONDS: u32 = 864_000;

/// One name's latest schema change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaEntry {
    /// The keyspace (as created; kept when dropped).
    pub keyspace: KeyspaceDef,
    /// When the change was made.
    pub timestamp: Timestamp,
    /// Whether the change was a drop.
    pub dropped: bool,
}

impl SchemaEntry {
    /// Whether `self` supersedes `other` (for the same name).
    fn supersedes(&self, other: &SchemaEntry) -> bool {
        (self.timestamp, self.dropped, self.keyspace.id.0)
            > (other.timestamp, other.dropped, other.keyspace.id.0)
    }
}

/// The schema: the latest entry per keyspace name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schema {
    entries: BTreeMap<String, SchemaEntry>,
}

impl Schema {
    /// The entries, by name (dropped ones included).
    pub fn entries(&self) -> impl Iterator<Item = &SchemaEntry> {
        self.entries.values()
    }

    /// The keyspaces that exist (not dropped), by name.
    pub fn keyspaces(&self) -> impl Iterator<Item = &KeyspaceDef> {
        self.entries
            .values()
            .filter(|e| !e.dropped)
            .map(|e| &e.keyspace)
    }

    /// The keyspace named `name`, unless dropped.
    pub fn keyspace(&self, name: &str) -> Option<&KeyspaceDef> {
        self.entries
            .get(name)
            .filter(|e| !e.dropped)
            .map(|e| &e.keyspace)
    }

    /// The existing keyspace with id `id`.
    pub fn keyspace_by_id(&self, id: KeyspaceId) -> Option<&KeyspaceDef> {
        self.keyspaces().find(|k| k.id == id)
    }

    /// Merges one entry; returns whether the schema changed.
    pub fn merge_entry(&mut self, entry: SchemaEntry) -> bool {
        match self.entries.get(&entry.keyspace.name) {
            Some(current) if !entry.supersedes(current) => false,
            _ => {
                self.entries.insert(entry.keyspace.name.clone(), entry);
                true
            }
        }
    }

    /// Merges every entry of `other`; returns whether the schema changed.
    pub fn merge(&mut self, other: impl IntoIterator<Item = SchemaEntry>) -> bool {
        other
            .into_iter()
            .fold(false, |changed, e| self.merge_entry(e) | changed)
    }

    /// A version identifying the schema's content: equal schemas have equal
    /// versions on every node; the empty schema has the nil version.
    pub fn version(&self) -> uuid::Uuid {
        if self.entries.is_empty() {
            return uuid::Uuid::nil();
        }
        let mut bytes = Vec::new();
        for entry in self.entries.values() {
            bytes.extend_from_slice(entry.keyspace.name.as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(entry.keyspace.id.0.as_bytes());
            bytes.extend_from_slice(entry.keyspace.strategy.to_string().as_bytes());
            bytes.push(0);
            bytes.extend_from_slice(&entry.keyspace.gc_grace_seconds.to_le_bytes());
            bytes.extend_from_slice(&entry.timestamp.0.to_le_bytes());
            bytes.push(entry.dropped as u8);
        }
        let (h1, h2) = cassandra_murmur3_x64_128(&bytes, 0);
        uuid::Builder::from_u128(((h1 as u128) << 64) | h2 as u128)
            .with_variant(uuid::Variant::RFC4122)
            .with_version(uuid::Version::Custom)
            .into_uuid()
    }
}

/// Checks a keyspace name: 1 to 48 ASCII letters, digits or underscores.
pub fn validate_keyspace_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 48 {
        return Err(format!("keyspace name {name:?} must be 1 to 48 characters"));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!(
            "keyspace name {name:?} may contain only letters, digits and underscores"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, id: u128, ts: i64, dropped: bool) -> SchemaEntry {
        SchemaEntry {
            keyspace: KeyspaceDef {
                name: name.into(),
                id: KeyspaceId(uuid::Uuid::from_u128(id)),
                strategy: ReplicationStrategy::simple(3).unwrap(),
                gc_grace_seconds: DEFAULT_GC_GRACE_SECONDS,
            },
            timestamp: Timestamp(ts),
            dropped,
        }
    }

    #[test]
    fn the_latest_change_per_name_wins_in_any_order() {
        let changes = [
            entry("a", 1, 10, false),
            entry("a", 1, 20, true),
            entry("a", 2, 30, false),
            entry("b", 3, 5, false),
        ];
        let mut forward = Schema::default();
        forward.merge(changes.iter().cloned());
        let mut backward = Schema::default();
        backward.merge(changes.iter().rev().cloned());
        assert_eq!(forward, backward);
        assert_eq!(forward.version(), backward.version());
        assert_eq!(
            forward.keyspace("a").unwrap().id,
            KeyspaceId(uuid::Uuid::from_u128(2))
        );
        assert!(
            !forward.merge(changes.iter().cloned()),
            "merging again changes nothing"
        );
    }

    #[test]
    fn a_drop_hides_the_keyspace_and_an_old_create_does_not_revive_it() {
        let mut schema = Schema::default();
        schema.merge([entry("a", 1, 10, false), entry("a", 1, 20, true)]);
        assert!(schema.keyspace("a").is_none());
        assert!(!schema.merge_entry(entry("a", 1, 10, false)));
        assert!(schema.keyspace("a").is_none());
        assert_ne!(schema.version(), uuid::Uuid::nil());
    }

    #[test]
    fn keyspace_names_are_checked() {
        assert!(validate_keyspace_name("users_2").is_ok());
        assert!(validate_keyspace_name("").is_err());
        assert!(validate_keyspace_name("has-dash").is_err());
        assert!(validate_keyspace_name(&"x".repeat(49)).is_err());
    }
}
