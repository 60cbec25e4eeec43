//! A node's short-lived cache of user records and of passwords that
//! verified, so that a request costs an Argon2 check only when the cache
//! has nothing (as Cassandra's `roles_validity` and
//! `credentials_validity`).
//!
//! A verified password is remembered as a keyed digest of the user name,
//! the stored hash it verified against and the password: it verifies again
//! for as long as the user's hash is the same, across re-reads of the
//! record (a grant changed) and past the validity. So a user whose record
//! is stale is read again, and its password is not checked again unless
//! its hash changed.
//!
//! The cache holds two bounded segments, each forgetting its least
//! recently used name when full: names whose password never verified
//! (unknown names among them, which an attacker can invent without end),
//! and names with a verified password (which only a right password puts
//! there). A spray of invented names so evicts only other unverified
//! names, never a user who logged in (as the segmented caches ClickHouse's
//! reviewers asked for).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::lru::Lru;
use crate::user::UserRecord;

/// Names kept at most in each segment (unverified, verified).
pub const CACHE_CAPACITY: usize = 10_000;

/// What the cache knows of a user.
#[derive(Debug, PartialEq, Eq)]
pub enum Cached<'a> {
    /// Nothing: read the record.
    Miss,
    /// The record, read less than the validity ago (`None`: no such user),
    /// and whether this very password verified against its hash.
    Known {
        /// The record.
        record: Option<&'a UserRecord>,
        /// This password verified against it.
        verified: bool,
    },
    /// A record read longer than the validity ago: read it again. Whether
    /// this password verified against its hash (and so will against the
    /// record read again, if its hash is the same).
    Stale {
        /// This password verified against the stale record's hash.
        verified: bool,
    },
}

struct Entry {
    record: Option<UserRecord>,
    read_at_ms: u64,
    /// The keyed digest of the name, the hash and the password that
    /// verified against it; never the password.
    verified: Option<[u8; 32]>,
}

/// User records by name, each trusted for `validity_ms` after it was read.
/// Sans-IO: the caller passes the clock.
pub struct CredentialCache {
    validity_ms: u64,
    /// A random key per process, so the digests are useless elsewhere.
    key: [u8; 32],
    /// Names whose password has not verified.
    unverified: Lru<String, Entry>,
    /// Names with a password that verified.
    verified: Lru<String, Entry>,
}

impl CredentialCache {
    /// A cache trusting what it read for `validity_ms` (0: never caches).
    pub fn new(validity_ms: u64) -> CredentialCache {
        CredentialCache {
            validity_ms,
            key: rand::random(),
            unverified: Lru::new(CACHE_CAPACITY),
            verified: Lru::new(CACHE_CAPACITY),
        }
    }

    fn digest(key: &[u8; 32], name: &str, record: &UserRecord, password: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
        for part in [name, record.hash.as_phc()] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part.as_bytes());
        }
        mac.update(password.as_bytes());
        mac
    }

    /// What is known of `name` at `now_ms`, and whether `password` verified
    /// (compared in constant time). The entry counts as recently used.
    pub fn lookup(&mut self, name: &str, password: &str, now_ms: u64) -> Cached<'_> {
        let (key, validity) = (self.key, self.validity_ms);
        let entry = match self.verified.get_mut(name) {
            Some(entry) => entry,
            None => match self.unverified.get_mut(name) {
                Some(entry) => entry,
                None => return Cached::Miss,
            },
        };
        let verified = match (&entry.record, &entry.verified) {
            (Some(record), Some(digest)) => Self::digest(&key, name, record, password)
                .verify_slice(digest)
                .is_ok(),
            _ => false,
        };
        if now_ms.saturating_sub(entry.read_at_ms) >= validity {
            return Cached::Stale { verified };
        }
        Cached::Known {
            record: entry.record.as_ref(),
            verified,
        }
    }

    /// `name`'s record if it was read less than the validity ago (inner
    /// `None`: no such user), whatever the password.
    pub fn fresh_record(&self, name: &str, now_ms: u64) -> Option<Option<&UserRecord>> {
        let entry = self
            .verified
            .peek(name)
            .or_else(|| self.unverified.peek(name))?;
        (now_ms.saturating_sub(entry.read_at_ms) < self.validity_ms)
            .then_some(entry.record.as_ref())
    }

    /// Remembers `record` (`None`: no such user), read at `now_ms`. A
    /// verified password is kept while the record's hash is the same.
    pub fn store(&mut self, name: &str, record: Option<UserRecord>, now_ms: u64) {
        if self.validity_ms == 0 {
            return;
        }
        if let Some(entry) = self.verified.get_mut(name) {
            let same_hash =
                matches!((&entry.record, &record), (Some(old), Some(new)) if old.hash == new.hash);
            if same_hash {
                entry.record = record;
                entry.read_at_ms = now_ms;
                return;
            }
            self.verified.remove(name);
        }
        self.unverified.insert(
            name.to_string(),
            Entry {
                record,
                read_at_ms: now_ms,
                verified: None,
            },
        );
    }

    /// Remembers that `password` verified against `name`'s cached record.
    pub fn mark_verified(&mut self, name: &str, password: &str) {
        let mut entry = match self.unverified.remove(name) {
            Some(entry) => entry,
            None => match self.verified.remove(name) {
                Some(entry) => entry,
                None => return,
            },
        };
        let Some(record) = &entry.record else {
            self.unverified.insert(name.to_string(), entry);
            return;
        };
        let digest = Self::digest(&self.key, name, record, password).finalize();
        entry.verified = Some(digest.into_bytes().into());
        self.verified.insert(name.to_string(), entry);
    }

    /// A keyed digest of `name` and `password` (never the password): how
    /// a node tells requests with the same credentials apart from others.
    pub fn fingerprint(&self, name: &str, password: &str) -> [u8; 32] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key");
        mac.update(&(name.len() as u64).to_le_bytes());
        mac.update(name.as_bytes());
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Forgets `name` (its record was changed through this node).
    pub fn invalidate(&mut self, name: &str) {
        self.unverified.remove(name);
        self.verified.remove(name);
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.unverified.len() + self.verified.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        assert_eq!(
            cache.lookup("cassandra", "pw", 3_000),
            Cached::Stale { verified: false }
        );
    }

    #[test]
    fn only_the_password_that_verified_is_remembered_and_while_the_hash_is_the_same() {
        let mut cache = CredentialCache::new(2_000);
        let user = record(true);
        cache.store("cassandra", Some(user.clone()), 0);
        cache.mark_verified("cassandra", "right");
        let known = |record, verified| Cached::Known {
            record: Some(record),
            verified,
        };
        assert_eq!(cache.lookup("cassandra", "right", 1), known(&user, true));
        assert_eq!(cache.lookup("cassandra", "wrong", 1), known(&user, false));
        // Read again, unchanged or with other grants: still verified.
        cache.store("cassandra", Some(user.clone()), 10);
        assert_eq!(cache.lookup("cassandra", "right", 11), known(&user, true));
        let demoted = record(false);
        cache.store("cassandra", Some(demoted.clone()), 20);
        assert_eq!(
            cache.lookup("cassandra", "right", 21),
            known(&demoted, true)
        );
        // Stale, it still tells whether the password verified.
        assert_eq!(
            cache.lookup("cassandra", "right", 2_020),
            Cached::Stale { verified: true }
        );
        assert_eq!(
            cache.lookup("cassandra", "wrong", 2_020),
            Cached::Stale { verified: false }
        );
        // A new hash (the password changed elsewhere): verify again.
        let mut changed = record(true);
        changed.hash = crate::password::StoredHash::from_phc("another hash".into());
        cache.store("cassandra", Some(changed.clone()), 2_030);
        assert_eq!(
            cache.lookup("cassandra", "right", 2_031),
            known(&changed, false)
        );
        cache.mark_verified("cassandra", "right");
        cache.invalidate("cassandra");
        assert_eq!(cache.lookup("cassandra", "right", 2_032), Cached::Miss);
        assert!(cache.is_empty());
    }

    #[test]
    fn requests_with_the_same_credentials_share_a_fingerprint() {
        let cache = CredentialCache::new(2_000);
        assert_eq!(cache.fingerprint("a", "pw"), cache.fingerprint("a", "pw"));
        assert_ne!(cache.fingerprint("a", "pw"), cache.fingerprint("a", "pw2"));
        assert_ne!(cache.fingerprint("ab", "c"), cache.fingerprint("a", "bc"));
        assert_ne!(
            CredentialCache::new(2_000).fingerprint("a", "pw"),
            cache.fingerprint("a", "pw"),
            "keyed per process"
        );
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
    fn a_full_cache_forgets_its_least_recently_used_names_not_a_verified_user() {
        let mut cache = CredentialCache::new(60_000);
        cache.store("alice", Some(record(false)), 0);
        cache.mark_verified("alice", "right");
        // A spray of invented names, every entry fresh, fills the cache
        // again and again while alice keeps logging in.
        for i in 0..(3 * CACHE_CAPACITY) {
            cache.store(&format!("u{i}"), None, 1);
            if i % 1000 == 0 {
                assert!(
                    matches!(
                        cache.lookup("alice", "right", 2),
                        Cached::Known { verified: true, .. }
                    ),
                    "alice's verified password was evicted after {i} unknown names"
                );
            }
            assert!(cache.len() <= CACHE_CAPACITY + 1);
        }
        assert!(
            matches!(
                cache.lookup("alice", "right", 2),
                Cached::Known { verified: true, .. }
            ),
            "alice's verified password was evicted by a spray of unknown names"
        );
        // The most recent unknown names are still there, the oldest gone.
        let last = format!("u{}", 3 * CACHE_CAPACITY - 1);
        assert_ne!(cache.lookup(&last, "x", 2), Cached::Miss);
        assert_eq!(cache.lookup("u0", "x", 2), Cached::Miss);
    }

    #[test]
    fn a_zero_validity_caches_nothing() {
        let mut cache = CredentialCache::new(0);
        cache.store("a", None, 0);
        assert!(cache.is_empty());
    }
}
