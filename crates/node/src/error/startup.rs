//! Settings a node refuses when it starts on a simulated network: those
//! that need the operating system's (the metrics port, TLS).
//!
//! Imports nothing of the node crate: every module imports the error
//! folder.

use std::net::SocketAddr;

use tonic::Code;

/// Why a node refused to start with its settings.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// `metrics_address` is set, but the node runs on a simulated network.
    #[error(
        "metrics_address {0}: the metrics port needs the operating system's network, and this \
         node runs on a simulated one"
    )]
    MetricsOnSimulatedNetwork(SocketAddr),

    /// TLS is configured, but the node runs on a simulated network.
    #[error("TLS needs the operating system's network, and this node runs on a simulated one")]
    TlsOnSimulatedNetwork,
}

impl StartupError {
    /// The gRPC status code of this error: always `INVALID_ARGUMENT`.
    pub fn code(&self) -> Code {
        Code::InvalidArgument
    }
}
