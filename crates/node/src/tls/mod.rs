//! TLS (rustls) on the client port and on internode gRPC: the settings, and
//! the server and client configurations made from them.
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
//! PEM files are read at start (a missing or malformed one stops the node
//! with an error naming the file and the setting) and again by `ringstore
//! reloadsecrets`, which swaps them while the node serves ([`server`]):
//! new connections, in and out, use the new files; open ones keep theirs.
//! A certificate is rotated without a restart by adding the new CA to `ca`
//! on every node, then swapping the certificates, then dropping the old CA
//! (see [`crate::rotation`]).
//!
//! # Caveats
//!
//! - No `optional`/transitional mode: a port is TLS-only or plaintext-only.
//!   Turning internode TLS on is a full-cluster restart (see the book,
//!   `docs/src/security.md`);
//!   the client port can be switched one node at a time if clients retry
//!   on another node.
//! - Gossip (UDP) is not encrypted; it is authenticated by the cluster secret.

pub mod server;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

pub use server::ServerTls;

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
    /// The certificates or key do not make a server configuration.
    #[error("invalid TLS settings for the {port} port (check {settings}): {source}")]
    Server {
        /// `client` or `internode`.
        port: &'static str,
        /// The settings the files come from.
        settings: &'static str,
        /// What is wrong with them.
        source: ServerSetupError,
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

/// Why PEM files do not make a server configuration.
#[derive(Debug, thiserror::Error)]
pub enum ServerSetupError {
    /// A file is not PEM of the expected kind.
    #[error("{0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    /// The certificate file holds no certificate.
    #[error("no certificate in the file")]
    NoCertificate,
    /// rustls refused the certificate, key or CA.
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
    /// The CA does not make a client certificate verifier.
    #[error("{0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// The server TLS of the ports that serve TLS, replaceable at runtime.
#[derive(Clone, Default)]
pub struct TlsHandles {
    /// The client port's (none: plaintext).
    pub client: Option<ServerTls>,
    /// The internode port's (none: plaintext).
    pub internode: Option<ServerTls>,
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
    pub fn server_config(&self) -> Result<Option<rustls::ServerConfig>, TlsError> {
        if !self.enabled {
            return Ok(None);
        }
        let files = ServerFiles {
            port: "client",
            settings: "client_encryption.certificate, private_key and ca",
            certificate: read_setting(&self.certificate, "client_encryption.certificate")?,
            key: read_setting(&self.private_key, "client_encryption.private_key")?,
            client_ca: match (&self.ca, self.require_client_auth) {
                (Some(ca), true) => Some(read(ca, "client_encryption.ca")?),
                _ => None,
            },
        };
        files.server_config().map(Some)
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
    pub fn configs(&self) -> Result<Option<(rustls::ServerConfig, ClientTlsConfig)>, TlsError> {
        if self.internode_encryption == InternodeEncryption::None {
            return Ok(None);
        }
        let certificate = read_setting(&self.certificate, "server_encryption.certificate")?;
        let key = read_setting(&self.private_key, "server_encryption.private_key")?;
        let ca = read_setting(&self.ca, "server_encryption.ca")?;
        let server = ServerFiles {
            port: "internode",
            settings: "server_encryption.certificate, private_key and ca",
            certificate: certificate.clone(),
            key: key.clone(),
            client_ca: self.require_client_auth.then(|| ca.clone()),
        }
        .server_config()?;
        let client = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca))
            .identity(Identity::from_pem(certificate, key));
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

/// The file a required setting names (checked present at start).
fn read_setting(path: &Option<PathBuf>, setting: &'static str) -> Result<Vec<u8>, TlsError> {
    read(path.as_deref().unwrap_or(Path::new("")), setting)
}

/// The PEM contents a server configuration is made of.
struct ServerFiles {
    port: &'static str,
    settings: &'static str,
    certificate: Vec<u8>,
    key: Vec<u8>,
    /// The CA client certificates must chain to (none: no client certificate asked).
    client_ca: Option<Vec<u8>>,
}

impl ServerFiles {
    /// A rustls server configuration serving HTTP/2 (as tonic's would).
    fn server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        self.build().map_err(|source| TlsError::Server {
            port: self.port,
            settings: self.settings,
            source,
        })
    }

    fn build(&self) -> Result<rustls::ServerConfig, ServerSetupError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain =
            CertificateDer::pem_slice_iter(&self.certificate).collect::<Result<Vec<_>, _>>()?;
        if chain.is_empty() {
            return Err(ServerSetupError::NoCertificate);
        }
        let key = PrivateKeyDer::from_pem_slice(&self.key)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                for certificate in CertificateDer::pem_slice_iter(ca) {
                    roots.add(certificate?)?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(chain, key)?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
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
