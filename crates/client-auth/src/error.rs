//! Why a user, a permission or a stored record is refused.

/// A bad name, permission or record. Messages never hold a password or a
/// hash.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// Not one of `read`, `write`, `schema`, `admin`.
    #[error("unknown permission {0:?} (expected read, write, schema or admin)")]
    UnknownPermission(String),
    /// A user name outside the allowed form.
    #[error("user name {0:?} must be 1 to 64 characters: letters, digits, and _ - . @")]
    BadUserName(String),
    /// An empty or oversized password.
    #[error("a password must be 1 to {max} bytes", max = crate::password::MAX_PASSWORD_BYTES)]
    BadPassword,
    /// A stored user record that does not decode.
    #[error("stored user record is unreadable: {0}")]
    CorruptRecord(String),
    /// A stored user record written by a newer release.
    #[error("stored user record has version {0}; this release reads version 1")]
    UnknownVersion(u8),
    /// Hashing failed (argon2 refused its parameters; a bug).
    #[error("password hashing failed: {0}")]
    Hashing(String),
}
