//! The node's network seam, served by turmoil's simulated network: gossip
//! on its UDP, the servers on its TCP listeners, peer channels and the
//! test's clients over its TCP streams.
//!
//! turmoil binds only the unspecified address (a host has one address), so
//! sockets are bound to `0.0.0.0` on the port asked for and report the
//! address asked for as their own, as a socket bound to the host's address
//! would.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use hyper_util::rt::TokioIo;
use ringstore_membership::{GossipSocket, IoFuture};
use ringstore_node::platform::{Connection, Keepalive, Listener, Transport};
use tonic::transport::{Channel, Endpoint};

/// turmoil's network, as a node's [`Transport`], with the keepalive its
/// connections use.
#[derive(Debug)]
pub struct TurmoilTransport {
    /// How its connections detect a peer that stopped answering.
    pub keepalive: Keepalive,
}

impl Default for TurmoilTransport {
    fn default() -> Self {
        TurmoilTransport {
            keepalive: Self::KEEPALIVE,
        }
    }
}

impl TurmoilTransport {
    /// How connections over it detect a peer that stopped answering: at
    /// once, since turmoil's TCP never retransmits a segment a partition
    /// lost, so such a connection stalls for good (real TCP would resume).
    pub const KEEPALIVE: Keepalive = Keepalive {
        interval: std::time::Duration::from_secs(1),
        timeout: std::time::Duration::from_secs(1),
    };
}

impl Transport for TurmoilTransport {
    fn bind_datagram(&self, address: SocketAddr) -> IoFuture<'_, Box<dyn GossipSocket>> {
        Box::pin(async move {
            let socket = turmoil::net::UdpSocket::bind(unspecified(address)).await?;
            Ok(Box::new(Datagrams { socket, address }) as Box<dyn GossipSocket>)
        })
    }

    fn listen(&self, address: SocketAddr) -> IoFuture<'_, Box<dyn Listener>> {
        Box::pin(async move {
            let listener = turmoil::net::TcpListener::bind(unspecified(address)).await?;
            Ok(Box::new(Connections { listener, address }) as Box<dyn Listener>)
        })
    }

    fn connect(&self, address: SocketAddr) -> IoFuture<'_, Box<dyn Connection>> {
        Box::pin(async move {
            let stream = turmoil::net::TcpStream::connect(address).await?;
            Ok(Box::new(stream) as Box<dyn Connection>)
        })
    }

    fn keepalive(&self) -> Keepalive {
        self.keepalive
    }
}

/// The unspecified address on `address`'s port: what turmoil binds.
fn unspecified(address: SocketAddr) -> SocketAddr {
    SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), address.port())
}

/// A turmoil UDP socket as gossip's socket.
struct Datagrams {
    socket: turmoil::net::UdpSocket,
    /// The address it was asked to bind.
    address: SocketAddr,
}

impl GossipSocket for Datagrams {
    fn recv_from<'a>(&'a self, buffer: &'a mut [u8]) -> IoFuture<'a, (usize, SocketAddr)> {
        Box::pin(self.socket.recv_from(buffer))
    }

    fn send_to<'a>(&'a self, packet: &'a [u8], to: SocketAddr) -> IoFuture<'a, usize> {
        Box::pin(self.socket.send_to(packet, to))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.address)
    }
}

/// A turmoil TCP listener as a server's listener.
struct Connections {
    listener: turmoil::net::TcpListener,
    /// The address it was asked to bind.
    address: SocketAddr,
}

impl Listener for Connections {
    fn accept(&self) -> IoFuture<'_, (Box<dyn Connection>, SocketAddr)> {
        Box::pin(async move {
            let (stream, peer) = self.listener.accept().await?;
            Ok((Box::new(stream) as Box<dyn Connection>, peer))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.address)
    }
}

/// A lazily connected gRPC channel to `address` over the simulated
/// network, for the test's clients (call it from inside the simulation).
pub fn channel(address: SocketAddr) -> Channel {
    channel_with(address, TurmoilTransport::KEEPALIVE)
}

/// [`channel`], with `keepalive`.
pub fn channel_with(address: SocketAddr, keepalive: Keepalive) -> Channel {
    Endpoint::from_shared(format!("http://{address}"))
        .expect("a socket address is a valid URI")
        .connect_timeout(std::time::Duration::from_secs(2))
        .http2_keep_alive_interval(keepalive.interval)
        .keep_alive_timeout(keepalive.timeout)
        .keep_alive_while_idle(true)
        .connect_with_connector_lazy(tower::service_fn(move |_| async move {
            turmoil::net::TcpStream::connect(address)
                .await
                .map(TokioIo::new)
        }))
}
