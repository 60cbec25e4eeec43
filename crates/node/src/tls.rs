//! TLS (rustls, through tonic) on the client port and on internode gRPC:
//! the settings, and the server and client configurations made from them.
//!
//! Each port is configured on its own, as Cassandra's
//! `client_encryption_options` and `server_encryption_options`:
//!
//! - **Client port** ([`ClientEncryption`]): `enabled` serves TLS only
//!   (a plaintext client fails its handshake); `require_client_auth` also
//!   demands a client certificate chaining to `ca` (mutual TLS).
//! - **Internode** ([`ServerEncryption`]): `internode_encryption = "all"`
//!   serves the internode port over TLS only and makes every outgoing
//!   internode channel (replica reads and writes, schema, hints, streaming)
//!   TLS, verifying the peer's certificate against `ca` by the IP address
//!   it is dialled at (so node certificates carry their IP addresses as
//!   subject alternative names). Outgoing channels present the node's own
//!   certificate, and with `require_client_auth` (the default) the server
//!   demands one: a node whose certificate comes from another CA can neither
//!   call nor be called.
//!
//! PEM files are read once, at start; a missing or malformed one stops the
//! node with an error naming the file and the setting.
//!
//! # Caveats
//!
//! - No certificate reload at runtime: restart the node (a rolling restart
//!   changes certificates cluster-wide).
//! - No `optional`/transitional mode: a port is TLS-only or plaintext-only.
//!   Turning internode TLS on is a full-cluster restart (see the README);
//!   the client port can be switched one node at a time if clients retry
//!   on another node.
//! - Gossip (UDP) is not encrypted; it is authenticated by the cluster secret.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file cannot be read.
    #[error("cannot read {setting} {path}: {source}")]
    Read {
        /// The setting naming the file.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The certificates or key do not make a TLS configuration.
    #[error("invalid TLS settings for the {port} port (check {settings}): {source}")]
    Setup {
        /// `client` or `internode`.
        port: &'static str,
        /// The settings the files come from.
        settings: &'static str,
        /// What rustls or tonic said.
        source: tonic::transport::Error,
    },
}

/// TLS on the client port (as Cassandra's `client_encryption_options`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ClientEncryption {
    /// Serve the client port over TLS only; plaintext clients are refused.
    pub enabled: bool,
    /// The node's certificate chain (PEM). Required when enabled.
    pub certificate: Option<PathBuf>,
    /// The certificate's private key (PEM). Required when enabled.
    pub private_key: Option<PathBuf>,
    /// The CA client certificates must chain to (PEM). Required with
    /// `require_client_auth`.
    pub ca: Option<PathBuf>,
    /// Mutual TLS: refuse clients without a certificate from `ca`.
    pub require_client_auth: bool,
}

/// Which internode connections use TLS.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum InternodeEncryption {
    /// Plaintext (authenticated by the cluster secret, if set).
    #[default]
    None,
    /// Every internode connection, in and out, is TLS.
    All,
}

/// TLS on internode gRPC (as Cassandra's `server_encryption_options`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ServerEncryption {
    /// Which internode connections use TLS.
    pub internode_encryption: InternodeEncryption,
    /// The node's certificate chain (PEM), served and presented to peers;
    /// its subject alternative names must include the node's internode IP.
    pub certificate: Option<PathBuf>,
    /// The certificate's private key (PEM).
    pub private_key: Option<PathBuf>,
    /// The CA every node's certificate chains to (PEM).
    pub ca: Option<PathBuf>,
    /// Mutual TLS: refuse peers without a certificate from `ca` (default on).
    pub require_client_auth: bool,
}

impl Default for ServerEncryption {
    fn default() -> Self {
        ServerEncryption {
            internode_encryption: InternodeEncryption::None,
            certificate: None,
            private_key: None,
            ca: None,
            require_client_auth: true,
        }
    }
}

impl ClientEncryption {
    /// What is missing for these settings to work, if anything.
    pub fn check(&self) -> Result<(), String> {
        if !self.enabled {
            return Ok(());
        }
        require(
            &self.certificate,
            "client_encryption.certificate",
            "enabled",
        )?;
        require(
            &self.private_key,
            "client_encryption.private_key",
            "enabled",
        )?;
        if self.require_client_auth {
            require(&self.ca, "client_encryption.ca", "require_client_auth")?;
        }
        Ok(())
    }

    /// The client port's server TLS configuration (`None`: plaintext).
    pub fn server_config(&self) -> Result<Option<ServerTlsConfig>, TlsError> {
        if !self.enabled {
            return Ok(None);
        }
        let identity = identity(
            &self.certificate,
            &self.private_key,
            "client_encryption.certificate",
            "client_encryption.private_key",
        )?;
        let mut config = ServerTlsConfig::new().identity(identity);
        if self.require_client_auth
            && let Some(ca) = &self.ca
        {
            config = config.client_ca_root(read_certificate(ca, "client_encryption.ca")?);
        }
        Ok(Some(config))
    }
}

impl ServerEncryption {
    /// What is missing for these settings to work, if anything.
    pub fn check(&self) -> Result<(), String> {
        if self.internode_encryption == InternodeEncryption::None {
            return Ok(());
        }
        let why = "internode_encryption is all";
        require(&self.certificate, "server_encryption.certificate", why)?;
        require(&self.private_key, "server_encryption.private_key", why)?;
        require(&self.ca, "server_encryption.ca", why)
    }

    /// The internode port's server TLS configuration and the one of
    /// outgoing internode channels (`None`: plaintext).
    pub fn configs(&self) -> Result<Option<(ServerTlsConfig, ClientTlsConfig)>, TlsError> {
        if self.internode_encryption == InternodeEncryption::None {
            return Ok(None);
        }
        let identity = identity(
            &self.certificate,
            &self.private_key,
            "server_encryption.certificate",
            "server_encryption.private_key",
        )?;
        let ca_path = self.ca.as_deref().unwrap_or(Path::new(""));
        let ca = read_certificate(ca_path, "server_encryption.ca")?;
        let mut server = ServerTlsConfig::new().identity(identity.clone());
        if self.require_client_auth {
            server = server.client_ca_root(ca.clone());
        }
        let client = ClientTlsConfig::new().ca_certificate(ca).identity(identity);
        // Build one channel now so bad files fail the start, not the first call.
        Endpoint::from_static("https://127.0.0.1:1")
            .tls_config(client.clone())
            .map_err(|source| TlsError::Setup {
                port: "internode",
                settings: "server_encryption.certificate, private_key and ca",
                source,
            })?;
        Ok(Some((server, client)))
    }
}

fn require(value: &Option<PathBuf>, setting: &str, because: &str) -> Result<(), String> {
    match value {
        Some(_) => Ok(()),
        None => Err(format!("{setting} is required when {because}")),
    }
}

fn read(path: &Path, setting: &'static str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        setting,
        path: path.to_path_buf(),
        source,
    })
}

fn read_certificate(path: &Path, setting: &'static str) -> Result<Certificate, TlsError> {
    Ok(Certificate::from_pem(read(path, setting)?))
}

fn identity(
    certificate: &Option<PathBuf>,
    key: &Option<PathBuf>,
    certificate_setting: &'static str,
    key_setting: &'static str,
) -> Result<Identity, TlsError> {
    let empty = PathBuf::new();
    let certificate = read(certificate.as_ref().unwrap_or(&empty), certificate_setting)?;
    let key = read(key.as_ref().unwrap_or(&empty), key_setting)?;
    Ok(Identity::from_pem(certificate, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_malformed_file_is_an_error_naming_the_setting() {
        let dir = tempfile::tempdir().unwrap();
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "not a certificate").unwrap();
        let missing = ServerEncryption {
            internode_encryption: InternodeEncryption::All,
            certificate: Some(dir.path().join("absent.crt")),
            private_key: Some(garbage.clone()),
            ca: Some(garbage.clone()),
            require_client_auth: true,
        };
        let error = missing.configs().unwrap_err().to_string();
        assert!(
            error.contains("server_encryption.certificate") && error.contains("absent.crt"),
            "{error}"
        );
        let malformed = ServerEncryption {
            certificate: Some(garbage),
            ..missing
        };
        let error = malformed.configs().unwrap_err().to_string();
        assert!(error.contains("server_encryption"), "{error}");
        assert!(
            ServerEncryption::default().configs().unwrap().is_none(),
            "none is plaintext"
        );
    }
}
