//! Users as stored in [`AUTH_KEYSPACE`](crate::AUTH_KEYSPACE): the record,
//! its keys, its versioned encoding, and the default superuser.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::AccessError;
use crate::password::StoredHash;
use crate::permission::{Grant, Permission, Scope};

/// The default superuser's name, as Cassandra's.
pub const DEFAULT_SUPERUSER: &str = "cassandra";
/// The default superuser's password. While it is unchanged the default
/// superuser may only manage users (change its password, create others).
pub const DEFAULT_PASSWORD: &str = "cassandra";
/// The write timestamp (µs) of the default superuser's record and of the
/// first user index: the smallest there is, so that every node writing
/// them at first start writes the same cells, and any real change, which
/// carries a real timestamp, wins over them.
pub const BOOTSTRAP_TIMESTAMP_MICROS: i64 = 1;
/// The salt of the default superuser's hash (its password is public, so a
/// fixed salt costs nothing, and every node computes the same bytes).
const BOOTSTRAP_SALT: &[u8] = b"ringstore-default-superuser";

/// The key, in [`AUTH_KEYSPACE`](crate::AUTH_KEYSPACE), of the list of user names.
pub const USER_INDEX_KEY: &[u8] = b"users";

/// A user name: 1 to 64 of ASCII letters, digits, `_`, `-`, `.`, `@`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserName(String);

impl UserName {
    /// Checks `name`.
    pub fn new(name: &str) -> Result<UserName, AccessError> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.@".contains(c));
        if !valid {
            return Err(AccessError::BadUserName(name.chars().take(80).collect()));
        }
        Ok(UserName(name.to_string()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of this user's record.
    pub fn record_key(&self) -> Vec<u8> {
        format!("user/{}", self.0).into_bytes()
    }
}

impl TryFrom<String> for UserName {
    type Error = AccessError;
    fn try_from(name: String) -> Result<UserName, AccessError> {
        UserName::new(&name)
    }
}

impl From<UserName> for String {
    fn from(name: UserName) -> String {
        name.0
    }
}

impl fmt::Display for UserName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One user: its password hash, whether it is a superuser, and its grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserRecord {
    /// Its name.
    pub name: UserName,
    /// Its salted password hash.
    pub hash: StoredHash,
    /// A superuser has every permission on every keyspace.
    pub superuser: bool,
    /// What it may do besides.
    pub grants: BTreeSet<Grant>,
}

/// The stored form, version 1 (JSON, so an operator can read it).
#[derive(Serialize, Deserialize)]
struct RecordV1 {
    version: u8,
    name: UserName,
    hash: String,
    superuser: bool,
    grants: BTreeSet<Grant>,
}

/// The stored form of the user index, version 1.
#[derive(Serialize, Deserialize)]
struct IndexV1 {
    version: u8,
    users: BTreeSet<UserName>,
}

impl UserRecord {
    /// The default superuser, identical on every node.
    pub fn default_superuser() -> Result<UserRecord, AccessError> {
        Ok(UserRecord {
            name: UserName::new(DEFAULT_SUPERUSER)?,
            hash: StoredHash::with_salt(DEFAULT_PASSWORD, BOOTSTRAP_SALT)?,
            superuser: true,
            grants: BTreeSet::new(),
        })
    }

    /// Whether it holds `permission` on `scope` (a superuser holds all).
    pub fn holds(&self, permission: Permission, scope: &Scope) -> bool {
        self.superuser
            || self
                .grants
                .iter()
                .any(|g| g.permission == permission && g.scope.covers(permission, scope))
    }

    /// The stored bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(&RecordV1 {
            version: 1,
            name: self.name.clone(),
            hash: self.hash.as_phc().to_string(),
            superuser: self.superuser,
            grants: self.grants.clone(),
        })
        .expect("a user record serializes")
    }

    /// Reads stored bytes.
    pub fn decode(bytes: &[u8]) -> Result<UserRecord, AccessError> {
        let version = peek_version(bytes)?;
        if version != 1 {
            return Err(AccessError::UnknownVersion(version));
        }
        let record: RecordV1 =
            serde_json::from_slice(bytes).map_err(|e| AccessError::CorruptRecord(e.to_string()))?;
        Ok(UserRecord {
            name: record.name,
            hash: StoredHash::from_phc(record.hash),
            superuser: record.superuser,
            grants: record.grants,
        })
    }
}

/// The stored bytes of the user index.
pub fn encode_index(users: &BTreeSet<UserName>) -> Vec<u8> {
    serde_json::to_vec(&IndexV1 {
        version: 1,
        users: users.clone(),
    })
    .expect("a user index serializes")
}

/// Reads the stored user index.
pub fn decode_index(bytes: &[u8]) -> Result<BTreeSet<UserName>, AccessError> {
    let version = peek_version(bytes)?;
    if version != 1 {
        return Err(AccessError::UnknownVersion(version));
    }
    let index: IndexV1 =
        serde_json::from_slice(bytes).map_err(|e| AccessError::CorruptRecord(e.to_string()))?;
    Ok(index.users)
}

fn peek_version(bytes: &[u8]) -> Result<u8, AccessError> {
    #[derive(Deserialize)]
    struct Versioned {
        version: u8,
    }
    serde_json::from_slice::<Versioned>(bytes)
        .map(|v| v.version)
        .map_err(|e| AccessError::CorruptRecord(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_are_checked() {
        for good in ["alice", "a", "svc-1.app@prod", &"x".repeat(64)] {
            assert!(UserName::new(good).is_ok(), "{good}");
        }
        for bad in ["", "with space", "slash/", "é", &"x".repeat(65)] {
            assert!(UserName::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_record_round_trips_and_the_default_superuser_is_the_same_everywhere() {
        let mut record = UserRecord::default_superuser().unwrap();
        assert_eq!(record, UserRecord::default_superuser().unwrap());
        record.grants.insert(Grant {
            permission: Permission::Read,
            scope: Scope::Keyspace("demo".into()),
        });
        assert_eq!(UserRecord::decode(&record.encode()).unwrap(), record);
        assert!(crate::password::verify(
            DEFAULT_PASSWORD,
            Some(&record.hash)
        ));
    }

    #[test]
    fn unknown_versions_and_garbage_are_errors() {
        assert_eq!(
            UserRecord::decode(br#"{"version":2}"#),
            Err(AccessError::UnknownVersion(2))
        );
        assert!(matches!(
            UserRecord::decode(b"\x00\x01"),
            Err(AccessError::CorruptRecord(_))
        ));
        let users = BTreeSet::from([UserName::new("a").unwrap(), UserName::new("b").unwrap()]);
        assert_eq!(decode_index(&encode_index(&users)).unwrap(), users);
    }
}
