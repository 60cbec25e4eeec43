//! `KeyspaceId`: the identity of one incarnation of a keyspace.
//!
//! Data lives by id, not by the keyspace's name: the storage engine keeps a
//! keyspace's cells in a tree named by its id, and replicas, hints, repair
//! and streams name keyspaces by id. So dropping a keyspace and creating one
//! with the same name (which gets a new id) starts from an empty tree:
//! a replica that missed the drop can never resurrect the old data into the
//! new keyspace.

use std::fmt;
use std::str::FromStr;

use uuid::Uuid;

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
}

/// Text that is not a keyspace id (a UUID).
#[derive(Debug, thiserror::Error)]
#[error("invalid keyspace id {text:?}: {source}")]
pub struct InvalidKeyspaceId {
    /// The text that failed to parse.
    pub text: String,
    /// Why it failed.
    #[source]
    pub source: uuid::Error,
}

impl fmt::Display for KeyspaceId {
    /// The hyphenated UUID, as in `0b3c…-…`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.hyphenated().fmt(f)
    }
}

impl FromStr for KeyspaceId {
    type Err = InvalidKeyspaceId;

    /// Parses any UUID form (`Uuid::parse_str`), hyphenated or simple.
    fn from_str(text: &str) -> Result<KeyspaceId, InvalidKeyspaceId> {
        Uuid::parse_str(text.trim())
            .map(KeyspaceId)
            .map_err(|source| InvalidKeyspaceId {
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
    fn text_that_is_not_a_uuid_is_refused() {
        let error = "users".parse::<KeyspaceId>().unwrap_err();
        assert_eq!(error.text, "users");
    }
}
