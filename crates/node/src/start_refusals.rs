//! Why a node refuses to start as configured, or to take new secrets: the
//! errors of its security settings (`security`) and of its metrics port's
//! (`metrics_http`).
//!
//! Plain data, apart from the modules that raise them, so the node's error
//! type can carry them without importing those modules (which import the
//! configuration, which would lead back to the error type: see
//! `tests/module_graph.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;

/// The shortest cluster secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// Why a node refuses to start as configured.
#[derive(Debug, thiserror::Error)]
pub enum InsecureStart {
    /// Reachable from other machines, and nothing authenticates gossip.
    #[error(
        "{setting} {address} is not a loopback address, and nothing authenticates the \
         cluster's traffic: anyone who reaches it could join the ring, write and read \
         every key. Choose one: set a cluster secret of at least {MIN_SECRET_BYTES} bytes \
         on every node (cluster_secret_file = \"/etc/ringstore/secret\", or the \
         RINGSTORE_CLUSTER_SECRET variable), and add internode TLS \
         (server_encryption) against eavesdroppers; or start with --insecure \
         (insecure = true) to run open on purpose"
    )]
    Open {
        /// The setting whose address is reachable.
        setting: &'static str,
        /// The address.
        address: SocketAddr,
    },
    /// A secret too short to resist guessing.
    #[error(
        "the cluster secret is {len} bytes: it must be at least {MIN_SECRET_BYTES} \
         (make one with `head -c 32 /dev/urandom | base64`)"
    )]
    ShortSecret {
        /// Its length in bytes.
        len: usize,
    },
    /// Both ways of giving the secret at once.
    #[error("cluster_secret and cluster_secret_file are both set: keep one")]
    TwoSecrets,
    /// The secret file cannot be read.
    #[error("cluster_secret_file {path}: {source}")]
    SecretFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The secret file holds no secret.
    #[error("cluster_secret_file {path} holds no secret (one per line; # starts a comment)")]
    EmptySecretFile {
        /// The file.
        path: PathBuf,
    },
}

/// Why the metrics port cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum MetricsHttpError {
    /// The bearer token file cannot be read.
    #[error("cannot read metrics_security.bearer_token_file {path}: {source}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The bearer token file holds only whitespace.
    #[error("metrics_security.bearer_token_file {path} is empty")]
    EmptyToken {
        /// The file.
        path: PathBuf,
    },
    /// A certificate or key file of `client_encryption` does not read or parse.
    #[error("cannot read {setting} {path} for the metrics port's TLS: {reason}")]
    Pem {
        /// The setting naming the file.
        setting: &'static str,
        /// The file.
        path: PathBuf,
        /// What the PEM reader said.
        reason: String,
    },
    /// rustls refused the certificate and key.
    #[error(
        "invalid TLS settings for the metrics port (client_encryption.certificate, .private_key): {0}"
    )]
    Tls(#[from] tokio_rustls::rustls::Error),
}
