//! The datagram socket gossip runs on, behind a small trait: the
//! operating system's UDP socket for a real node, a simulated network's
//! socket for a deterministic simulation of a whole cluster.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

/// A boxed I/O future borrowing its socket and buffer.
pub type IoFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// What gossip needs of a datagram socket. Both futures must be
/// cancel-safe: the membership task drops a pending receive whenever a
/// timer or a command comes first.
pub trait GossipSocket: Send + Sync + 'static {
    /// Receives one datagram into `buffer`: its length and sender.
    fn recv_from<'a>(&'a self, buffer: &'a mut [u8]) -> IoFuture<'a, (usize, SocketAddr)>;

    /// Sends `packet` to `to` as one datagram.
    fn send_to<'a>(&'a self, packet: &'a [u8], to: SocketAddr) -> IoFuture<'a, usize>;

    /// The address the socket is bound to.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

impl GossipSocket for tokio::net::UdpSocket {
    fn recv_from<'a>(&'a self, buffer: &'a mut [u8]) -> IoFuture<'a, (usize, SocketAddr)> {
        Box::pin(tokio::net::UdpSocket::recv_from(self, buffer))
    }

    fn send_to<'a>(&'a self, packet: &'a [u8], to: SocketAddr) -> IoFuture<'a, usize> {
        Box::pin(tokio::net::UdpSocket::send_to(self, packet, to))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        tokio::net::UdpSocket::local_addr(self)
    }
}
