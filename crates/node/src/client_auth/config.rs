//! The `[auth]` settings.

use serde::Deserialize;

/// Who may use the client port.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Authenticator {
    /// Anyone who reaches the port may do anything (as Cassandra's
    /// `AllowAllAuthenticator`).
    #[default]
    AllowAll,
    /// Every request carries a user name and password from `system_auth`,
    /// and needs the permission its RPC calls for.
    Password,
}

/// Client authentication and authorization.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// `allow_all` (default) or `password`.
    pub authenticator: Authenticator,
    /// The replication factor `system_auth` is created with (SimpleStrategy;
    /// default 3), read and written at QUORUM: a cluster needs at least
    /// `rf/2 + 1` nodes up to log anyone in. Used only when this node
    /// creates the keyspace; create `system_auth` yourself first for
    /// another strategy.
    pub replication_factor: u32,
    /// How long a node trusts a user record (and a password that verified
    /// against it) before reading it again, in milliseconds (default 2000,
    /// as Cassandra's `roles_validity`): a grant, a revoke or a new
    /// password reaches other nodes within it. 0 reads on every request.
    pub validity_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            authenticator: Authenticator::AllowAll,
            replication_factor: 3,
            validity_ms: 2000,
        }
    }
}

impl AuthConfig {
    /// What is wrong with these settings, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.replication_factor == 0 {
            return Err("auth.replication_factor must be at least 1".into());
        }
        Ok(())
    }
}
