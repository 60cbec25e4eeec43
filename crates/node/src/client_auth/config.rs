//! The `[auth]` settings, and the check that passwords do not cross a
//! network in clear.
//!
//! A password sent over a plaintext client port can be read by anyone on
//! the path, so the password authenticator on a plaintext port is refused
//! unless the port is on a loopback address (only local processes reach
//! it: `ringstore demo`, the tests, a node behind a local proxy) or
//! `allow_plaintext_passwords` accepts the risk, which the node logs as
//! unsafe at every start.

use std::net::SocketAddr;

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
    /// Accept passwords on a plaintext client port on a non-loopback
    /// address (default false: such a node refuses to start; turn on
    /// `[client_encryption]` instead). Logged as unsafe at start.
    pub allow_plaintext_passwords: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            authenticator: Authenticator::AllowAll,
            replication_factor: 3,
            validity_ms: 2000,
            allow_plaintext_passwords: false,
        }
    }
}

impl AuthConfig {
    /// What is wrong with these settings for a client port at `listen`,
    /// served over TLS or not (`client_tls`), if anything.
    pub fn check(&self, listen: SocketAddr, client_tls: bool) -> Result<(), String> {
        if self.replication_factor == 0 {
            return Err("auth.replication_factor must be at least 1".into());
        }
        if self.passwords_in_clear(listen, client_tls) && !self.allow_plaintext_passwords {
            return Err(format!(
                "authenticator = \"password\" on a plaintext client port at {listen}: every \
                 request's password would cross the network in clear. Turn on client TLS \
                 ([client_encryption] enabled = true), listen on a loopback address, or accept \
                 the risk with auth.allow_plaintext_passwords = true"
            ));
        }
        Ok(())
    }

    /// Whether passwords reach a client port at `listen` in clear over a
    /// network (refused, or with `allow_plaintext_passwords` unsafe).
    pub fn passwords_in_clear(&self, listen: SocketAddr, client_tls: bool) -> bool {
        self.authenticator == Authenticator::Password && !client_tls && !listen.ip().is_loopback()
    }
}

#[cfg(test)]
mod tests {
    use crate::config::NodeConfig;

    /// The configuration the environment variables `pairs` make, or the
    /// error's message.
    fn load(pairs: &[(&str, &str)]) -> Result<NodeConfig, String> {
        let env = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        NodeConfig::load(None, env, []).map_err(|e| e.to_string())
    }

    const PASSWORD: (&str, &str) = ("RINGSTORE_AUTH__AUTHENTICATOR", "password");
    const NO_METRICS: (&str, &str) = ("RINGSTORE_METRICS_ENABLED", "false");
    const PUBLIC: (&str, &str) = ("RINGSTORE_LISTEN_ADDRESS", "10.1.2.3:7100");

    #[test]
    fn passwords_on_a_plaintext_client_port_are_refused_unless_it_is_loopback_or_allowed() {
        let refused = match load(&[PASSWORD, PUBLIC, NO_METRICS]) {
            Ok(_) => panic!("passwords on a plaintext client port at 10.1.2.3 were accepted"),
            Err(message) => message,
        };
        for words in [
            "10.1.2.3:7100",
            "in clear",
            "client_encryption",
            "auth.allow_plaintext_passwords = true",
        ] {
            assert!(refused.contains(words), "{words}: {refused}");
        }
        // Loopback only: the demo's and the tests' nodes.
        load(&[PASSWORD, ("RINGSTORE_LISTEN_ADDRESS", "127.0.0.9:7100")]).unwrap();
        load(&[PASSWORD, ("RINGSTORE_LISTEN_ADDRESS", "[::1]:7100")]).unwrap();
        // Allowed explicitly, or over TLS.
        let allowed = ("RINGSTORE_AUTH__ALLOW_PLAINTEXT_PASSWORDS", "true");
        load(&[PASSWORD, PUBLIC, NO_METRICS, allowed]).unwrap();
        load(&[
            PASSWORD,
            PUBLIC,
            NO_METRICS,
            ("RINGSTORE_CLIENT_ENCRYPTION__ENABLED", "true"),
            ("RINGSTORE_CLIENT_ENCRYPTION__CERTIFICATE", "/n.crt"),
            ("RINGSTORE_CLIENT_ENCRYPTION__PRIVATE_KEY", "/n.key"),
            ("RINGSTORE_CLIENT_ENCRYPTION__REQUIRE_CLIENT_AUTH", "false"),
        ])
        .unwrap();
        // No passwords, nothing to protect.
        load(&[PUBLIC, NO_METRICS]).unwrap();
    }

    #[test]
    fn a_clear_metrics_port_beside_a_secured_client_port_must_be_loopback_or_protected() {
        let loopback = ("RINGSTORE_LISTEN_ADDRESS", "127.0.0.9:7100");
        let public_metrics = ("RINGSTORE_METRICS_ADDRESS", "10.1.2.3:7200");
        let refused = match load(&[PASSWORD, loopback, public_metrics]) {
            Ok(_) => panic!("a clear /metrics at 10.1.2.3:7200 beside password auth was accepted"),
            Err(message) => message,
        };
        for words in [
            "10.1.2.3:7200",
            "metrics_security.tls = true",
            "metrics_security.bearer_token_file",
            "loopback",
            "metrics_enabled = false",
        ] {
            assert!(refused.contains(words), "{words}: {refused}");
        }
        // Loopback metrics, a token, TLS, or an open client port: fine.
        load(&[PASSWORD, loopback]).unwrap();
        load(&[
            PASSWORD,
            loopback,
            public_metrics,
            (
                "RINGSTORE_METRICS_SECURITY__BEARER_TOKEN_FILE",
                "/etc/token",
            ),
        ])
        .unwrap();
        load(&[
            PASSWORD,
            loopback,
            public_metrics,
            ("RINGSTORE_METRICS_SECURITY__TLS", "true"),
            ("RINGSTORE_CLIENT_ENCRYPTION__CERTIFICATE", "/n.crt"),
            ("RINGSTORE_CLIENT_ENCRYPTION__PRIVATE_KEY", "/n.key"),
        ])
        .unwrap();
        load(&[public_metrics]).unwrap();
        // TLS needs the client port's certificate and key.
        let no_files =
            load(&[public_metrics, ("RINGSTORE_METRICS_SECURITY__TLS", "true")]).unwrap_err();
        assert!(
            no_files.contains("client_encryption.certificate"),
            "{no_files}"
        );
    }
}
