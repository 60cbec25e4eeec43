//! `/metrics` over TLS: the client port's certificate and key as a rustls
//! server configuration, and a listener that hands axum connections whose
//! handshake is done. Handshakes run in tasks of their own (at most
//! [`HANDSHAKES`] at once, each given [`HANDSHAKE_TIMEOUT`]), so a client
//! that connects and says nothing holds up no one else.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{ServerConfig, crypto};
use tokio_rustls::server::TlsStream;

use super::security::MetricsHttpError;

/// Handshakes in progress at most.
const HANDSHAKES: usize = 64;
/// How long a client has to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A TLS acceptor serving `certificate` (a PEM chain) with `private_key`.
pub fn acceptor(certificate: &Path, private_key: &Path) -> Result<TlsAcceptor, MetricsHttpError> {
    let pem = |setting: &'static str, path: &Path, reason: String| MetricsHttpError::Pem {
        setting,
        path: path.to_path_buf(),
        reason,
    };
    let certificate_setting = "client_encryption.certificate";
    let chain = CertificateDer::pem_file_iter(certificate)
        .map_err(|e| pem(certificate_setting, certificate, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(certificate_setting, certificate, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem(
            certificate_setting,
            certificate,
            "no certificate in it".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(private_key)
        .map_err(|e| pem("client_encryption.private_key", private_key, e.to_string()))?;
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts TCP connections and yields them once their TLS handshake is
/// done; failed handshakes are dropped (logged at debug).
pub struct TlsListener {
    handshaken: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    accepting: JoinHandle<()>,
}

impl TlsListener {
    /// Serves TLS with `acceptor` on `listener`.
    pub fn new(listener: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        let local = listener.local_addr()?;
        let (sender, handshaken) = mpsc::channel(HANDSHAKES);
        let accepting = tokio::spawn(accept(listener, acceptor, sender));
        Ok(TlsListener {
            handshaken,
            local,
            accepting,
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    handshaken: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let slots = Arc::new(Semaphore::new(HANDSHAKES));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, most likely: wait, do not spin.
                tracing::debug!(%error, "metrics port: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let (acceptor, handshaken) = (acceptor.clone(), handshaken.clone());
        tokio::spawn(async move {
            let _slot = slot;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = handshaken.send((tls, peer)).await;
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, %peer, "metrics port: TLS handshake failed")
                }
                Err(_) => tracing::debug!(%peer, "metrics port: TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.handshaken.recv().await {
            Some(connection) => connection,
            // The accepting task ended (its runtime is stopping): no more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local)
    }
}
