//! Salted password hashes (Argon2id) and their verification in the same
//! time whether or not the user exists.

use std::sync::OnceLock;

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};

use crate::error::AccessError;

/// The longest password accepted, in bytes.
pub const MAX_PASSWORD_BYTES: usize = 1024;

/// An Argon2id hash in the PHC string format
/// (`$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`), with argon2's default
/// cost (19 MiB, 2 passes): tens of milliseconds per check in a release
/// build, which is why nodes cache verified credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredHash(String);

impl std::fmt::Debug for StoredHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredHash(..)")
    }
}

impl StoredHash {
    /// Hashes `password` with a random 16-byte salt.
    pub fn new(password: &str) -> Result<StoredHash, AccessError> {
        StoredHash::with_salt(password, &rand::random::<[u8; 16]>())
    }

    /// Hashes `password` with `salt` (deterministic: the default superuser's
    /// record, whose password is public anyway, is the same bytes on every
    /// node).
    pub fn with_salt(password: &str, salt: &[u8]) -> Result<StoredHash, AccessError> {
        check_password(password)?;
        let salt = SaltString::encode_b64(salt).map_err(|e| AccessError::Hashing(e.to_string()))?;
        let hash = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| AccessError::Hashing(e.to_string()))?;
        Ok(StoredHash(hash.to_string()))
    }

    /// A hash as stored.
    pub fn from_phc(text: String) -> StoredHash {
        StoredHash(text)
    }

    /// The PHC string, to store.
    pub fn as_phc(&self) -> &str {
        &self.0
    }
}

/// Refuses an empty or oversized password.
pub fn check_password(password: &str) -> Result<(), AccessError> {
    if password.is_empty() || password.len() > MAX_PASSWORD_BYTES {
        return Err(AccessError::BadPassword);
    }
    Ok(())
}

/// Whether `password` matches `stored`. With no stored hash (no such user)
/// the password is checked against a dummy hash of the same cost and the
/// answer is `false`, so the time taken does not tell whether the user
/// exists. A stored hash that does not parse verifies nothing.
pub fn verify(password: &str, stored: Option<&StoredHash>) -> bool {
    let dummy = dummy_hash();
    let (hash, exists) = match stored {
        Some(stored) => (stored.as_phc(), true),
        None => (dummy.as_phc(), false),
    };
    let parsed = match PasswordHash::new(hash) {
        Ok(parsed) => parsed,
        Err(_) => match PasswordHash::new(dummy.as_phc()) {
            // Still spend the time of a check.
            Ok(parsed) => {
                let _ = Argon2::default().verify_password(password.as_bytes(), &parsed);
                return false;
            }
            Err(_) => return false,
        },
    };
    let matches = Argon2::default()
        .verify_password(password.as_bytes(), &parsed)
        .is_ok();
    matches && exists
}

/// A hash of a random password, made once per process, checked against
/// when the user does not exist.
fn dummy_hash() -> &'static StoredHash {
    static DUMMY: OnceLock<StoredHash> = OnceLock::new();
    DUMMY.get_or_init(|| {
        let password = hex_of(&rand::random::<[u8; 16]>());
        StoredHash::new(&password).expect("a 32-character password hashes")
    })
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only() {
        let hash = StoredHash::new("correct horse").unwrap();
        assert!(verify("correct horse", Some(&hash)));
        assert!(!verify("correct hors", Some(&hash)));
        assert!(!verify("", Some(&hash)));
    }

    #[test]
    fn two_hashes_of_one_password_differ_by_their_salt() {
        let a = StoredHash::new("pw").unwrap();
        let b = StoredHash::new("pw").unwrap();
        assert_ne!(a, b);
        assert_eq!(
            StoredHash::with_salt("pw", b"0123456789abcdef").unwrap(),
            StoredHash::with_salt("pw", b"0123456789abcdef").unwrap()
        );
    }

    #[test]
    fn an_unknown_user_never_verifies_and_costs_a_full_check() {
        let hash = StoredHash::new("pw").unwrap();
        let _ = dummy_hash();
        assert!(!verify("pw", Some(&StoredHash::from_phc("garbage".into()))));
        let started = Instant::now();
        for _ in 0..3 {
            assert!(!verify("pw", None));
        }
        let missing = started.elapsed();
        let started = Instant::now();
        for _ in 0..3 {
            assert!(!verify("wrong", Some(&hash)));
        }
        let wrong = started.elapsed();
        // The same work: within a factor of 3 either way on a busy machine.
        assert!(
            missing * 3 > wrong && wrong * 3 > missing,
            "missing user {missing:?}, wrong password {wrong:?}"
        );
    }

    #[test]
    fn empty_and_oversized_passwords_are_refused() {
        assert_eq!(StoredHash::new(""), Err(AccessError::BadPassword));
        let long = "x".repeat(MAX_PASSWORD_BYTES + 1);
        assert_eq!(StoredHash::new(&long), Err(AccessError::BadPassword));
    }

    #[test]
    fn the_debug_form_hides_the_hash() {
        let hash = StoredHash::new("pw").unwrap();
        assert_eq!(format!("{hash:?}"), "StoredHash(..)");
    }
}
