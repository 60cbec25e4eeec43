//! The replicated schema: which keyspaces exist, with which replication.
//!
//! The schema is a map from keyspace name to its latest entry. Entries merge
//! by last-write-wins on their timestamp (on a tie a drop wins, then the
//! greater id), so merging is commutative, associative and idempotent: nodes
//! that exchange schemas in any order end with the same one, and the same
//! version. A dropped keyspace stays as a tombstone entry, so an old copy of
//! it cannot come back; its data is unreachable because a re-created
//! keyspace of the same name gets a new id.
//!
//! # Keyspace ids
//! A keyspace's id names its data on disk, so two ids for one name would
//! lose the data of whichever the merge drops. Ids are therefore not random
//! but derived ([`derive_keyspace_id`]) from the name and the id of the
//! entry the name had before (none, or a dropped one): two nodes creating
//! the same name at once, having seen the same history, derive the same id,
//! and the merge keeps one keyspace whose data tree holds the writes made
//! through either. A re-creation after a drop derives a new id from the
//! dropped one, so the old data stays unreachable.
//!
//! # Caveats
//! - Concurrent creates of one name with *different* settings end with the
//!   later create's settings (last write wins, as any schema change). Writes
//!   made meanwhile under the other settings' placement stay on the replicas
//!   that placement chose; until a repair moves them, a read may miss them.
//!
//! # Files
//! This file holds the schema as a value (entries, merge, versions);
//! `store.rs` keeps it in the node's storage and publishes changes to the
//! node; `sync.rs` spreads it: pushes a change to the live nodes and pulls
//! from any node whose gossiped schema version differs. `host.rs` says
//! what spreading it needs of the running node ([`SchemaHost`]), so no
//! schema module names the node's context. The gRPC edge is
//! `services/schema.rs`.

pub mod host;
pub mod store;
pub mod sync;
pub mod wire;

pub use host::SchemaHost;

use std::collections::BTreeMap;

use ringstore_placement::{ReplicationStrategy, cassandra_murmur3_x64_128};
use ringstore_replication::SpeculativeRetry;
use ringstore_storage::{KeyspaceId, Timestamp};

use crate::error::{KeyspaceNameRule, KeyspaceRequestError};

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
    /// When its reads ask one more replica (Cassandra's table option).
    pub speculative_retry: SpeculativeRetry,
    /// The replication a `keyspace alter` is moving it to, while the data
    /// moves: writes go to the replicas of both, reads stay on `strategy`
    /// (see [`crate::topology::alter`]).
    pub pending_strategy: Option<ReplicationStrategy>,
}

impl KeyspaceDef {
    /// Every replication its writes go to: `strategy`, and the pending one
    /// during an alter.
    pub fn write_strategies(&self) -> impl Iterator<Item = &ReplicationStrategy> {
        std::iter::once(&self.strategy).chain(&self.pending_strategy)
    }
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

    /// Whether the keyspace with id `id` was dropped (an id the schema
    /// does not know was not).
    pub fn is_dropped(&self, id: KeyspaceId) -> bool {
        self.entries().any(|e| e.dropped && e.keyspace.id == id)
    }

    /// The name of the keyspace with id `id`, dropped or not (its id when
    /// the schema does not know it).
    pub fn name_of(&self, id: KeyspaceId) -> String {
        self.entries()
            .find(|e| e.keyspace.id == id)
            .map(|e| e.keyspace.name.clone())
            .unwrap_or_else(|| id.to_string())
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
            bytes.extend_from_slice(entry.keyspace.speculative_retry.to_string().as_bytes());
            bytes.push(0);
            if let Some(pending) = &entry.keyspace.pending_strategy {
                bytes.extend_from_slice(pending.to_string().as_bytes());
            }
            bytes.push(0);
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

/// The id of a keyspace named `name` created where the schema's entry for
/// that name is `previous` (none, or a dropped keyspace): the same inputs
/// give the same id on every node (see the module docs).
pub fn derive_keyspace_id(name: &str, previous: Option<KeyspaceId>) -> KeyspaceId {
    let mut bytes = b"ringstore keyspace\0".to_vec();
    bytes.extend_from_slice(name.as_bytes());
    bytes.push(0);
    if let Some(previous) = previous {
        bytes.extend_from_slice(previous.0.as_bytes());
    }
    let (h1, h2) = cassandra_murmur3_x64_128(&bytes, 0);
    KeyspaceId(
        uuid::Builder::from_u128(((h1 as u128) << 64) | h2 as u128)
            .with_variant(uuid::Variant::RFC4122)
            .with_version(uuid::Version::Custom)
            .into_uuid(),
    )
}

impl Schema {
    /// The id a keyspace named `name` created now gets (see [`derive_keyspace_id`]).
    pub fn id_for_new_keyspace(&self, name: &str) -> KeyspaceId {
        derive_keyspace_id(name, self.entries.get(name).map(|e| e.keyspace.id))
    }
}

/// Checks a new keyspace's name: 1 to 48 ASCII letters, digits or
/// underscores, and not reserved in any case: `all` (a grant on `ALL` is
/// a grant on every keyspace, so a keyspace of that name could never be
/// granted alone) and `system…` (the node's own keyspaces), except
/// `system_auth` itself, which an operator may create ahead with the
/// replication it wants.
pub fn validate_keyspace_name(name: &str) -> Result<(), KeyspaceRequestError> {
    let broken = |rule| {
        Err(KeyspaceRequestError::BadName {
            name: name.to_string(),
            rule,
        })
    };
    if name.is_empty() || name.len() > 48 {
        return broken(KeyspaceNameRule::Length);
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return broken(KeyspaceNameRule::Characters);
    }
    let lower = name.to_ascii_lowercase();
    if lower == "all" {
        return broken(KeyspaceNameRule::ReservedAll);
    }
    if lower.starts_with("system") && name != ringstore_client_auth::AUTH_KEYSPACE {
        return broken(KeyspaceNameRule::ReservedSystem);
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
                speculative_retry: SpeculativeRetry::default(),
                pending_strategy: None,
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
    fn creating_a_name_twice_from_the_same_history_gives_one_id() {
        let schema = Schema::default();
        assert_eq!(
            schema.id_for_new_keyspace("a"),
            Schema::default().id_for_new_keyspace("a")
        );
        assert_ne!(
            schema.id_for_new_keyspace("a"),
            schema.id_for_new_keyspace("b")
        );
    }

    #[test]
    fn a_keyspace_re_created_after_a_drop_gets_a_new_id() {
        let mut schema = Schema::default();
        let first = schema.id_for_new_keyspace("a");
        schema.merge([entry("a", first.0.as_u128(), 10, false)]);
        schema.merge([entry("a", first.0.as_u128(), 20, true)]);
        let second = schema.id_for_new_keyspace("a");
        assert_ne!(second, first);
        schema.merge([entry("a", second.0.as_u128(), 30, false)]);
        schema.merge([entry("a", second.0.as_u128(), 40, true)]);
        let third = schema.id_for_new_keyspace("a");
        assert!(third != first && third != second);
    }

    #[test]
    fn keyspace_names_are_checked() {
        assert!(validate_keyspace_name("users_2").is_ok());
        assert!(validate_keyspace_name("").is_err());
        assert!(validate_keyspace_name("has-dash").is_err());
        assert!(validate_keyspace_name(&"x".repeat(49)).is_err());
    }

    #[test]
    fn reserved_names_cannot_be_keyspaces_in_any_case() {
        for reserved in [
            "all",
            "ALL",
            "All",
            "system",
            "System_schema",
            "systemx",
            "SYSTEM_AUTH",
        ] {
            let refused = validate_keyspace_name(reserved)
                .err()
                .unwrap_or_else(|| panic!("keyspace name {reserved:?} was accepted"));
            assert!(
                refused.to_string().contains("reserved"),
                "{reserved}: {refused}"
            );
        }
        // system_auth itself may be created ahead, with the strategy wanted.
        assert!(validate_keyspace_name("system_auth").is_ok());
        for fine in ["allowed", "al", "my_system", "sys"] {
            assert!(validate_keyspace_name(fine).is_ok(), "{fine}");
        }
    }
}
