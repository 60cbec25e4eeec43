//! A node's short-lived cache of user records and of passwords that
//! verified, so that a request costs an Argon2 check only when the cache
//! has nothing fresh (as Cassandra's `roles_validity` and
//! `credentials_validity`).

use std::collections::HashMap;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::user::UserRecord;

/// Entries kept at most; a full cache forgets its expired entries, then
/// everything (names an attacker invents must not grow it without bound).
pub const CACHE_CAPACITY: usize = 10_000;

/// What the cache knows of a user, fresh (read less than the validity ago).
#[derive(Debug, PartialEq, Eq)]
pub enum Cached<'a> {
    /// Nothing fresh: read the record.
    Miss,
    /// The record as read (`None`: no such user), and whether this very
    /// password verified against it since.
    Known {
        /// The record.
        record: Option<&'a UserRecord>,
        /// This password verified against it.
        verified: bool,
    },
}

struct Entry {
    record: Option<UserRecord>,
    read_at_ms: u64,
    /// A keyed digest of the password that verified, never the password.
    verified: Option<Vec<u8>>,
}

/// User records by name, each trusted for `validity_ms` after it was read.
/// Sans-IO: the caller passes the clock.
pub struct CredentialCache {
    validity_ms: u64,
    /// A random key per process, so the digests are useless elsewhere.
    key: [u8; 32],
    entries: HashMap<String, Entry>,
}

impl CredentialCache {
    /// A cache trusting what it read for `validity_ms` (0: never caches).
    pub fn new(validity_ms: u64) -> CredentialCache {
        CredentialCache {
            validity_ms,
            key: rand::random(),
            entries: HashMap::new(),
        }
    }

    fn digest(&self, name: &str, password: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(&(name.len() as u64).to_le_bytes());
        mac.update(name.as_bytes());
        mac.update(password.as_bytes());
        mac
    }

    /// What is known of `name` at `now_ms`, and whether `password` verified.
    pub fn lookup(&self, name: &str, password: &str, now_ms: u64) -> Cached<'_> {
        let Some(entry) = self.entries.get(name) else {
            return Cached::Miss;
        };
        if now_ms.saturating_sub(entry.read_at_ms) >= self.validity_ms {
            return Cached::Miss;
        }
        let verified = entry
            .verified
            .as_ref()
            .is_some_and(|digest| self.digest(name, password).verify_slice(digest).is_ok());
        Cached::Known {
            record: entry.record.as_ref(),
            verified,
        }
    }

    /// Remembers `record` (`None`: no such user), read at `now_ms`; a
    /// verified password is forgotten unless the record is unchanged.
    pub fn store(&mut self, name: &str, record: Option<UserRecord>, now_ms: u64) {
        if self.validity_ms == 0 {
            return;
        }
        if self.entries.len() >= CACHE_CAPACITY && !self.entries.contains_key(name) {
            let validity = self.validity_ms;
            self.entries
                .retain(|_, e| now_ms.saturating_sub(e.read_at_ms) < validity);
            if self.entries.len() >= CACHE_CAPACITY {
                self.entries.clear();
            }
        }
        let verified = match self.entries.remove(name) {
            Some(old) if old.record == record => old.verified,
            _ => None,
        };
        self.entries.insert(
            name.to_string(),
            Entry {
                record,
                read_at_ms: now_ms,
                verified,
            },
        );
    }

    /// Remembers that `password` verified against `name`'s cached record.
    pub fn mark_verified(&mut self, name: &str, password: &str) {
        let digest = self.digest(name, password).finalize().into_bytes().to_vec();
        if let Some(entry) = self.entries.get_mut(name) {
            entry.verified = Some(digest);
        }
    }

    /// Forgets `name` (its record was changed through this node).
    pub fn invalidate(&mut self, name: &str) {
        self.entries.remove(name);
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(superuser: bool) -> UserRecord {
        let mut record = UserRecord::default_superuser().unwrap();
        record.superuser = superuser;
        record
    }

    #[test]
    fn a_record_is_trusted_for_the_validity_then_read_again() {
        let mut cache = CredentialCache::new(2_000);
        assert_eq!(cache.lookup("cassandra", "pw", 0), Cached::Miss);
        let user = record(true);
        cache.store("cassandra", Some(user.clone()), 1_000);
        assert_eq!(
            cache.lookup("cassandra", "pw", 2_999),
            Cached::Known {
                record: Some(&user),
                verified: false
            }
        );
        assert_eq!(cache.lookup("cassandra", "pw", 3_000), Cached::Miss);
    }

    #[test]
    fn only_the_password_that_verified_is_remembered() {
        let mut cache = CredentialCache::new(2_000);
        let user = record(true);
        cache.store("cassandra", Some(user.clone()), 0);
        cache.mark_verified("cassandra", "right");
        let known = |verified| Cached::Known {
            record: Some(&user),
            verified,
        };
        assert_eq!(cache.lookup("cassandra", "right", 1), known(true));
        assert_eq!(cache.lookup("cassandra", "wrong", 1), known(false));
        // Re-read unchanged: still verified; changed: verify again.
        cache.store("cassandra", Some(user.clone()), 10);
        assert_eq!(cache.lookup("cassandra", "right", 11), known(true));
        cache.store("cassandra", Some(record(false)), 20);
        assert!(matches!(
            cache.lookup("cassandra", "right", 21),
            Cached::Known {
                verified: false,
                ..
            }
        ));
        cache.invalidate("cassandra");
        assert_eq!(cache.lookup("cassandra", "right", 22), Cached::Miss);
    }

    #[test]
    fn unknown_users_are_cached_too_and_the_cache_stays_bounded() {
        let mut cache = CredentialCache::new(1_000);
        cache.store("ghost", None, 0);
        assert_eq!(
            cache.lookup("ghost", "x", 1),
            Cached::Known {
                record: None,
                verified: false
            }
        );
        for i in 0..(CACHE_CAPACITY + 10) {
            cache.store(&format!("u{i}"), None, 5);
        }
        assert!(cache.len() <= CACHE_CAPACITY);
    }

    #[test]
    fn a_zero_validity_caches_nothing() {
        let mut cache = CredentialCache::new(0);
        cache.store("a", None, 0);
        assert!(cache.is_empty());
    }
}
