//! A node's network: the operating system's sockets, or a transport given
//! (a simulated network's) behind three small traits.
//!
//! # Design
//! [`Network::Os`] keeps the node's own socket code: tokio's UDP socket for
//! gossip, tonic's TCP listener (Nagle off) for the servers, tonic's TCP
//! connector for peers (bound to the internode IP). [`Network::Simulated`]
//! asks a [`Transport`] for each of those instead: a datagram socket, a
//! [`Listener`] whose accepted [`Connection`]s the servers serve, and a
//! connection for each peer channel. The byte streams carry the same gRPC.
//!
//! # Invariants
//! - Accepted connections report their peer's and their own address to
//!   the services (tonic's `TcpConnectInfo`), as TCP connections do.
//! - Every future a transport returns is cancel-safe: a server stops
//!   accepting, and a connection attempt times out, by dropping it.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use ringstore_membership::{GossipSocket, IoFuture};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Where a node's sockets come from. See the module docs.
#[derive(Clone)]
pub enum Network {
    /// The operating system's UDP and TCP.
    Os,
    /// A transport given: a simulated network's.
    Simulated(Arc<dyn Transport>),
}

impl Network {
    /// How its internode connections find out that their peer stopped
    /// answering.
    pub fn keepalive(&self) -> Keepalive {
        match self {
            Network::Os => Keepalive::OS,
            Network::Simulated(transport) => transport.keepalive(),
        }
    }
}

/// How a connection whose peer stopped answering (a partition, a machine
/// lost, a paused process) is found out and dropped, so that it is made
/// again instead of every later call queueing on it: an HTTP/2 ping after
/// `interval` without receiving anything, and the connection dropped
/// after `timeout` without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    /// How long a connection may receive nothing before it pings.
    pub interval: Duration,
    /// How long a ping may go unanswered.
    pub timeout: Duration,
}

impl Default for Keepalive {
    fn default() -> Keepalive {
        Keepalive::OS
    }
}

impl Keepalive {
    /// Over the operating system's TCP: a dead peer is noticed within
    /// 10 s (TCP itself retransmits what a short partition lost).
    pub const OS: Keepalive = Keepalive {
        interval: Duration::from_secs(5),
        timeout: Duration::from_secs(5),
    };

    /// The longest a connection to a peer that stopped answering lives.
    pub fn detection(&self) -> Duration {
        self.interval + self.timeout
    }
}

/// A byte stream between two nodes (or a client and a node).
pub trait Connection: AsyncRead + AsyncWrite + Send + Unpin + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Connection for T {}

/// Accepts connections on one address.
pub trait Listener: Send + Sync + 'static {
    /// The next connection, and its peer's address.
    fn accept(&self) -> IoFuture<'_, (Box<dyn Connection>, SocketAddr)>;

    /// The address it listens on.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A network other than the operating system's: sockets on request.
pub trait Transport: Send + Sync + 'static {
    /// A datagram socket bound to `address`, for gossip.
    fn bind_datagram(&self, address: SocketAddr) -> IoFuture<'_, Box<dyn GossipSocket>>;

    /// A listener bound to `address`.
    fn listen(&self, address: SocketAddr) -> IoFuture<'_, Box<dyn Listener>>;

    /// A connection to `address`.
    fn connect(&self, address: SocketAddr) -> IoFuture<'_, Box<dyn Connection>>;

    /// How connections over it detect a peer that stopped answering (a
    /// network whose TCP does not retransmit needs it sooner).
    fn keepalive(&self) -> Keepalive;
}

/// A connection a [`Listener`] accepted, as the servers serve it.
pub struct Accepted {
    io: Box<dyn Connection>,
    info: TcpConnectInfo,
}

impl Accepted {
    /// The connections `listener` accepts, as a stream for tonic's server.
    pub fn stream(
        listener: Box<dyn Listener>,
    ) -> impl Stream<Item = io::Result<Accepted>> + Send + 'static {
        let local = listener.local_addr().ok();
        futures::stream::unfold(listener, move |listener| async move {
            let accepted = listener.accept().await.map(|(io, remote)| Accepted {
                io,
                info: TcpConnectInfo {
                    local_addr: local,
                    remote_addr: Some(remote),
                },
            });
            Some((accepted, listener))
        })
    }
}

impl Connected for Accepted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.info.clone()
    }
}

impl AsyncRead for Accepted {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Accepted {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}
