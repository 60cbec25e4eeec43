//! Internode gRPC clients, one lazily connected channel per peer address,
//! each call signed with the key this node shares with the peer when the
//! node has a cluster secret (see [`crate::internode_auth`]).
//!
//! Connections leave from the node's internode IP when it binds one (as
//! Cassandra binds its outbound connections to its listen address), so a
//! peer, a firewall or a test's network proxy sees which node is calling,
//! not whichever address the kernel picks. Not when the internode address
//! is unspecified (`0.0.0.0`), nor towards a peer the bound IP cannot reach
//! (another address family, or loopback towards a non-loopback peer).
//!
//! On a simulated network ([`Network::Simulated`]) the channels connect
//! through its transport instead of TCP.
//!
//! Every channel sends HTTP/2 keep-alive pings and drops a connection whose
//! ping goes unanswered ([`Keepalive`], as the network sets it): a peer
//! that vanished without closing its connections (a partition, a machine
//! lost) is then reconnected to, instead of every later call queueing on a
//! connection nobody answers.
//!
//! A channel no call has asked for in [`IDLE_CHANNEL`] is dropped from the
//! cache ([`Peers::close_idle`], every [`SWEEP_EVERY`]); its connection
//! closes once no call or stream still holds a clone of it (a long range
//! stream, or the coordinator's apply stream to a replica, keeps its own),
//! and the next call connects again. Without it a node kept a connection to
//! every peer it ever asked anything, each pinged every keep-alive interval:
//! after a fresh start of 100 nodes, 198 established connections per node
//! (one each way to every peer, opened by the joiners' questions), none of
//! them used again.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use ringstore_proto::v1::internode_client::InternodeClient;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

use crate::internode_auth::{PeerDirectory, SignedChannel};
use crate::platform::{Keepalive, Network, Transport};

/// The largest HTTP/2 frame this node accepts from a peer (the peer sends
/// no larger): one stream chunk (256 KiB) in one frame instead of sixteen
/// of HTTP/2's default 16 KiB, each of which the receiver reads, buffers
/// and hands on by itself. Small messages are sent as they are either way.
const MAX_FRAME_BYTES: u32 = 256 * 1024 + 1024;

/// An internode client: its calls carry this node's proof.
pub type PeerClient = InternodeClient<SignedChannel>;

/// How long a peer's channel stays cached with no call asking for it.
pub const IDLE_CHANNEL: Duration = Duration::from_secs(120);
/// How often the node looks for idle channels.
pub const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// A cached client, when a call last asked for it, and who holds it.
struct Cached {
    client: PeerClient,
    used: tokio::time::Instant,
    /// More than one strong count: a call or stream holds a clone.
    holders: Weak<()>,
}

impl Cached {
    /// Whether no call has asked for it in `idle` and none holds it.
    fn idle(&self, now: tokio::time::Instant, idle: Duration) -> bool {
        now.saturating_duration_since(self.used) >= idle && self.holders.strong_count() <= 1
    }
}

/// The clients of every peer this node has talked to.
#[derive(Default)]
pub struct Peers {
    /// Signs every call (none without a cluster secret).
    signer: Option<Arc<PeerDirectory>>,
    /// TLS for every channel (none: plaintext); replaced by a reload.
    /// Held only to read or swap it, never across an await.
    tls: Mutex<Option<ClientTlsConfig>>,
    /// The node's internode IP, if it binds a specific one.
    source: Option<IpAddr>,
    /// The simulated network's transport (none: TCP).
    transport: Option<Arc<dyn Transport>>,
    /// How connections detect a peer that stopped answering.
    keepalive: Keepalive,
    /// Held only to look up, insert or drop a client, never across an await.
    clients: Mutex<HashMap<SocketAddr, Cached>>,
}

impl Peers {
    /// Peers whose calls are signed by `signer`, if any, over TLS
    /// configured by `tls`, if any (checked already: it builds), leaving
    /// from `internode_ip` where it can (see the module's comment), on
    /// `network`.
    pub fn new(
        signer: Option<Arc<PeerDirectory>>,
        tls: Option<ClientTlsConfig>,
        internode_ip: IpAddr,
        network: &Network,
    ) -> Peers {
        Peers {
            signer,
            tls: Mutex::new(tls),
            source: (!internode_ip.is_unspecified()).then_some(internode_ip),
            transport: match network {
                Network::Os => None,
                Network::Simulated(transport) => Some(Arc::clone(transport)),
            },
            keepalive: network.keepalive(),
            clients: Mutex::default(),
        }
    }

    /// The local IP connections to `peer` leave from, if one is bound.
    fn source_for(&self, peer: SocketAddr) -> Option<IpAddr> {
        self.source.filter(|source| {
            source.is_ipv4() == peer.is_ipv4() && source.is_loopback() == peer.ip().is_loopback()
        })
    }

    /// Uses `tls` for every channel from now on (a reload of the TLS
    /// files): channels are made anew, so new connections present the new
    /// certificate and trust the new CA; calls already made finish on the
    /// old ones.
    pub fn set_tls(&self, tls: ClientTlsConfig) {
        // The clients' lock first, as `client` takes them: no channel is
        // made with the old settings after the cache is cleared.
        let mut clients = self.clients.lock().expect("peer clients lock");
        *self.tls.lock().expect("peer TLS lock") = Some(tls);
        clients.clear();
    }

    /// A client for the peer at `addr` (cheap to clone; connects on first use
    /// and reconnects after failures).
    pub fn client(&self, addr: SocketAddr) -> PeerClient {
        let mut clients = self.clients.lock().expect("peer clients lock");
        let tls = self.tls.lock().expect("peer TLS lock").clone();
        let now = tokio::time::Instant::now();
        let cached = clients.entry(addr).or_insert_with(|| {
            let channel = self.new_channel(addr, tls);
            Cached {
                holders: channel.holders(),
                client: InternodeClient::new(channel)
                    .max_decoding_message_size(64 * 1024 * 1024)
                    .max_encoding_message_size(64 * 1024 * 1024),
                used: now,
            }
        });
        cached.used = now;
        cached.client.clone()
    }

    /// Drops every cached channel that no call has asked for in `idle`
    /// and that no call or stream holds; returns how many. Dropping the
    /// last handle closes the connection.
    pub fn close_idle(&self, idle: Duration) -> usize {
        let mut clients = self.clients.lock().expect("peer clients lock");
        let before = clients.len();
        let now = tokio::time::Instant::now();
        clients.retain(|_, cached| !cached.idle(now, idle));
        before - clients.len()
    }

    /// Runs until the node stops: every [`SWEEP_EVERY`], drops the
    /// channels idle for [`IDLE_CHANNEL`] ([`Peers::close_idle`]).
    pub async fn keep_closing_idle(&self) {
        let mut ticker = tokio::time::interval(SWEEP_EVERY);
        loop {
            ticker.tick().await;
            let closed = self.close_idle(IDLE_CHANNEL);
            if closed > 0 {
                tracing::debug!(
                    closed,
                    open = self.cached(),
                    "closed idle internode channels"
                );
            }
        }
    }

    /// How many peers' channels are cached.
    pub fn cached(&self) -> usize {
        self.clients.lock().expect("peer clients lock").len()
    }

    /// A new channel to the peer at `addr`, over TLS with `tls`, if any.
    fn new_channel(&self, addr: SocketAddr, tls: Option<ClientTlsConfig>) -> SignedChannel {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
            .expect("a socket address is a valid URI")
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .max_frame_size(MAX_FRAME_BYTES)
            .http2_keep_alive_interval(self.keepalive.interval)
            .keep_alive_timeout(self.keepalive.timeout)
            .keep_alive_while_idle(true)
            .local_address(self.source_for(addr));
        if let Some(tls) = tls {
            endpoint = endpoint
                .tls_config(tls)
                .expect("the TLS settings were checked when read");
        }
        SignedChannel::new(self.connect(&endpoint, addr), addr, self.signer.clone())
    }

    /// A lazily connected channel to `addr`: over TCP, or through the
    /// simulated network's transport.
    fn connect(&self, endpoint: &Endpoint, addr: SocketAddr) -> Channel {
        match &self.transport {
            None => endpoint.connect_lazy(),
            Some(transport) => {
                let transport = Arc::clone(transport);
                endpoint.connect_with_connector_lazy(tower::service_fn(move |_| {
                    let transport = Arc::clone(&transport);
                    async move { transport.connect(addr).await.map(TokioIo::new) }
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ringstore_proto::v1 as pb;
    use tokio::io::AsyncReadExt;

    use super::*;

    /// A listener that accepts one connection, reads it to its end, and
    /// then reports that the caller closed it.
    async fn listener() -> (SocketAddr, tokio::sync::oneshot::Receiver<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (closed, on_close) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = [0u8; 1024];
            while socket.read(&mut buffer).await.is_ok_and(|n| n > 0) {}
            let _ = closed.send(());
        });
        (addr, on_close)
    }

    /// Makes a call to `addr` that connects and then gives up waiting.
    async fn call(peers: &Peers, addr: SocketAddr) {
        let request = pb::MetadataSeenRequest::default();
        let mut client = peers.client(addr);
        let call = client.metadata_seen(request);
        let _ = tokio::time::timeout(Duration::from_millis(300), call).await;
    }

    #[tokio::test]
    async fn a_channel_idle_and_unheld_is_dropped_and_its_connection_closed() {
        let peers = Peers::new(None, None, "127.0.0.1".parse().unwrap(), &Network::Os);
        let (addr, mut on_close) = listener().await;
        call(&peers, addr).await;
        assert_eq!(peers.close_idle(Duration::from_secs(3600)), 0, "just used");
        let held = peers.client(addr);
        assert_eq!(peers.close_idle(Duration::ZERO), 0, "a call holds it");
        assert!(on_close.try_recv().is_err(), "the connection is open");
        drop(held);
        assert_eq!(peers.close_idle(Duration::ZERO), 1);
        assert_eq!(peers.cached(), 0);
        tokio::time::timeout(Duration::from_secs(10), on_close)
            .await
            .expect("the connection closes once its channel is dropped")
            .unwrap();
    }

    #[test]
    fn connections_leave_from_the_internode_ip_only_where_it_can_reach() {
        let peers = Peers::new(None, None, "127.0.0.3".parse().unwrap(), &Network::Os);
        let loopback: SocketAddr = "127.0.0.4:7101".parse().unwrap();
        let remote: SocketAddr = "10.0.0.4:7101".parse().unwrap();
        let v6: SocketAddr = "[::1]:7101".parse().unwrap();
        assert_eq!(
            peers.source_for(loopback),
            Some("127.0.0.3".parse().unwrap())
        );
        assert_eq!(peers.source_for(remote), None);
        assert_eq!(peers.source_for(v6), None);
        let public = Peers::new(None, None, "10.0.0.3".parse().unwrap(), &Network::Os);
        assert_eq!(public.source_for(remote), Some("10.0.0.3".parse().unwrap()));
        assert_eq!(public.source_for(loopback), None);
        let unbound = Peers::new(None, None, "0.0.0.0".parse().unwrap(), &Network::Os);
        assert_eq!(unbound.source_for(remote), None);
    }
}
