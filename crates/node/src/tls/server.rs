//! Server TLS that can be swapped while the server runs, and the stream of
//! accepted TLS connections a tonic server serves.
//!
//! tonic reads its server TLS configuration once, when the server starts;
//! to rotate a certificate without a restart (`ringstore reloadsecrets`),
//! the node accepts TLS itself: each new connection is handshaken with the
//! configuration current when it arrives ([`ServerTls`]), and connections
//! already open keep theirs. Handshakes run concurrently (a slow or
//! silent client holds one slot, not the port), each within
//! [`HANDSHAKE_TIMEOUT`]; a failed one is dropped and counted in the log.

use std::io;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::{Stream, StreamExt, future};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;

/// How long a client has to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The most handshakes under way at once on one port.
const CONCURRENT_HANDSHAKES: usize = 128;

/// A port's server TLS configuration, replaceable while the port serves.
#[derive(Clone)]
pub struct ServerTls {
    /// Held only to clone or replace the acceptor, never across an await.
    current: Arc<RwLock<TlsAcceptor>>,
}

impl ServerTls {
    /// Serves `config` until it is replaced.
    pub fn new(config: ServerConfig) -> ServerTls {
        ServerTls {
            current: Arc::new(RwLock::new(TlsAcceptor::from(Arc::new(config)))),
        }
    }

    /// Serves `config` to every connection from now on.
    pub fn replace(&self, config: ServerConfig) {
        *self.current.write().expect("server TLS lock") = TlsAcceptor::from(Arc::new(config));
    }

    fn acceptor(&self) -> TlsAcceptor {
        self.current.read().expect("server TLS lock").clone()
    }
}

/// The TLS connections of `tcp`'s accepted connections, handshaken with
/// `tls`'s configuration of the moment. Errors of the TCP accept itself
/// pass through (the server decides whether to go on); failed handshakes
/// are dropped.
pub fn accept_tls<S>(tcp: S, tls: ServerTls) -> impl Stream<Item = io::Result<TlsStream<TcpStream>>>
where
    S: Stream<Item = io::Result<TcpStream>>,
{
    tcp.map(move |accepted| {
        let acceptor = tls.acceptor();
        async move {
            let stream = match accepted {
                Ok(stream) => stream,
                Err(error) => return Some(Err(error)),
            };
            let peer = stream.peer_addr().ok();
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => Some(Ok(tls)),
                Ok(Err(error)) => {
                    tracing::debug!(?peer, %error, "TLS handshake failed");
                    None
                }
                Err(_) => {
                    tracing::debug!(?peer, "TLS handshake timed out");
                    None
                }
            }
        }
    })
    .buffer_unordered(CONCURRENT_HANDSHAKES)
    .filter_map(future::ready)
}
