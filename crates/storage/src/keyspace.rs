//! `KeyspaceId`: the identity of a keyspace's data on disk.
//!
//! A keyspace's cells live in the tree `data/<uuid>`. The id, not the
//! keyspace's name, names the tree, so dropping a keyspace and creating one
//! with the same name (which gets a new id) starts from an empty tree:
//! a replica that missed the drop can never resurrect the old data into the
//! new keyspace.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

use crate::error::{Result, StorageError};

/// The prefix of the trees that hold keyspace data.
const DATA_TREE_PREFIX: &str = "data/";

/// The permanent identity of one keyspace incarnation. Never reused: a
/// re-created keyspace gets a new id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyspaceId(pub Uuid);

impl KeyspaceId {
    /// A fresh random (v4) id (tests; the schema derives the ids of the
    /// keyspaces it creates from their names and history).
    pub fn random() -> KeyspaceId {
        KeyspaceId(Uuid::new_v4())
    }

    /// The name of the engine tree that holds this keyspace's cells: `data/<uuid>`.
    pub fn data_tree_name(&self) -> String {
        format!("{DATA_TREE_PREFIX}{}", self.0.hyphenated())
    }

    /// The keyspace whose data tree is called `name`, if `name` is one.
    pub fn from_data_tree_name(name: &str) -> Option<KeyspaceId> {
        name.strip_prefix(DATA_TREE_PREFIX)?.parse().ok()
    }
}

impl fmt::Display for KeyspaceId {
    /// The hyphenated UUID, as in `0b3c…-…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for KeyspaceId {
    type Err = StorageError;

    /// Parses any UUID form (`Uuid::parse_str`), hyphenated or simple.
    fn from_str(text: &str) -> Result<KeyspaceId> {
        Uuid::parse_str(text.trim())
            .map(KeyspaceId)
            .map_err(|source| StorageError::InvalidKeyspaceId {
                text: text.to_string(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_ids_round_trip_through_text() {
        let id = KeyspaceId::random();
        assert_eq!(id.to_string().parse::<KeyspaceId>().unwrap(), id);
        assert_eq!(id.to_string().len(), 36);
    }

    #[test]
    fn a_keyspace_lives_in_a_data_tree_named_by_its_id() {
        let id: KeyspaceId = "67e55044-10b1-426f-9247-bb680e5fe0c8".parse().unwrap();
        assert_eq!(
            id.data_tree_name(),
            "data/67e55044-10b1-426f-9247-bb680e5fe0c8"
        );
        assert_eq!(
            KeyspaceId::from_data_tree_name(&id.data_tree_name()),
            Some(id)
        );
        assert_eq!(KeyspaceId::from_data_tree_name("system"), None);
    }

    #[test]
    fn a_recreated_keyspace_gets_a_different_tree() {
        assert_ne!(
            KeyspaceId::random().data_tree_name(),
            KeyspaceId::random().data_tree_name()
        );
    }

    #[test]
    fn text_that_is_not_a_uuid_is_refused() {
        let error = "users".parse::<KeyspaceId>().unwrap_err();
        assert!(matches!(error, StorageError::InvalidKeyspaceId { text, .. } if text == "users"));
    }
}
