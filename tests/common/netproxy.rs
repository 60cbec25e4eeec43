//! A network between server processes that a test can cut: one proxy per
//! node for its gossip (UDP) and internode gRPC (TCP) ports, so partitions
//! and one-way drops need no root, no network namespaces and no iptables.
//!
//! Node `i` binds its real ports on `127.<block>.0.<i+1>` but advertises
//! the proxy's `127.<block>.1.<i+1>` (`broadcast_gossip_address`,
//! `broadcast_internode_address`, and the seeds point at node 0's proxy),
//! so every packet and connection between nodes passes a proxy. The proxy
//! knows the sender by its source IP: gossip sockets are bound to the
//! node's IP, and internode connections leave from the node's internode IP
//! (`crates/node/src/peers.rs`). A sender it does not know (the test's own
//! clients, the CLI) is never cut.
//!
//! A cut direction `a → b` drops `a`'s gossip datagrams to `b` and holds
//! back the bytes `a` sends `b` on every internode connection between them
//! (either side may have opened it) until the cut heals, as a real network
//! that loses packets does to TCP: requests stall, nothing is corrupted,
//! and after the heal the held bytes arrive late. A partition cuts both
//! directions.
//!
//! Gossip control replies go to the datagram's source address, so each pair
//! of nodes has a relay socket of its own that forwards in both directions:
//! what node `b` answers to a datagram relayed from `a` reaches `a` through
//! it, cut or not like the rest.
//!
//! The client port is not proxied: the test's clients reach every node
//! (they stand for clients on both sides of a partition), so an isolated
//! node still coordinates, and must answer `UNAVAILABLE` or time out, never
//! acknowledge a `QUORUM` write it could not replicate.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// The gossip and internode ports, on the real and the proxy addresses.
pub const GOSSIP_PORT: u16 = 7000;
pub const INTERNODE_PORT: u16 = 7101;

/// The directions cut, as (from, to) node indices.
#[derive(Default)]
struct Cuts(Mutex<HashSet<(usize, usize)>>);

impl Cuts {
    fn is_cut(&self, from: Option<usize>, to: Option<usize>) -> bool {
        match (from, to) {
            (Some(from), Some(to)) => self.0.lock().unwrap().contains(&(from, to)),
            _ => false,
        }
    }
}

/// The proxies of `nodes` nodes on one address block, on a runtime of
/// their own (so a test thread that blocks, or a busy load, cannot slow
/// the network down); stopped when dropped.
pub struct Network {
    block: u8,
    nodes: usize,
    cuts: Arc<Cuts>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Network {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Network {
    /// Starts the proxies of nodes `0..nodes` on `block`.
    pub fn start(block: u8, nodes: usize) -> Network {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("netproxy")
            .enable_all()
            .build()
            .expect("the proxy runtime starts");
        let cuts = Arc::<Cuts>::default();
        runtime.block_on(Self::spawn_proxies(block, nodes, cuts.clone()));
        Network {
            block,
            nodes,
            cuts,
            runtime: Some(runtime),
        }
    }

    /// Binds every proxy socket and spawns their tasks.
    async fn spawn_proxies(block: u8, nodes: usize, cuts: Arc<Cuts>) {
        let proxy = |i: usize, port: u16| SocketAddr::from(([127, block, 1, i as u8 + 1], port));
        // One relay socket per pair of nodes, on 127.<block>.2.1.
        let mut pairs = std::collections::HashMap::new();
        for a in 0..nodes {
            for b in a + 1..nodes {
                let relay = UdpSocket::bind((Ipv4Addr::new(127, block, 2, 1), 0))
                    .await
                    .expect("a relay socket binds");
                let relay = Arc::new(relay);
                pairs.insert((a, b), relay.clone());
                tokio::spawn(relay_pair(relay, block, (a, b), cuts.clone()));
            }
        }
        for to in 0..nodes {
            // Node `to`'s relay with each node (none with itself).
            let relays = (0..nodes)
                .map(|from| pairs.get(&(from.min(to), from.max(to))).cloned())
                .collect();
            let gossip = UdpSocket::bind(proxy(to, GOSSIP_PORT))
                .await
                .expect("the gossip proxy binds");
            tokio::spawn(gossip_proxy(gossip, block, to, relays, cuts.clone()));
            let internode = TcpListener::bind(proxy(to, INTERNODE_PORT))
                .await
                .expect("the internode proxy binds");
            tokio::spawn(internode_proxy(internode, block, to, cuts.clone()));
        }
    }

    /// Node `i`'s real address on `port`.
    pub fn real(&self, i: usize, port: u16) -> SocketAddr {
        SocketAddr::from(([127, self.block, 0, i as u8 + 1], port))
    }

    /// Node `i`'s proxy address on `port` (what it advertises).
    pub fn proxy(&self, i: usize, port: u16) -> SocketAddr {
        SocketAddr::from(([127, self.block, 1, i as u8 + 1], port))
    }

    /// The environment that makes node `i` advertise its proxy.
    pub fn env(&self, i: usize) -> Vec<(String, String)> {
        vec![
            (
                "RINGSTORE_BROADCAST_GOSSIP_ADDRESS".into(),
                self.proxy(i, GOSSIP_PORT).to_string(),
            ),
            (
                "RINGSTORE_BROADCAST_INTERNODE_ADDRESS".into(),
                self.proxy(i, INTERNODE_PORT).to_string(),
            ),
        ]
    }

    /// The seed every node is given: node 0's gossip proxy.
    pub fn seed(&self) -> String {
        self.proxy(0, GOSSIP_PORT).to_string()
    }

    /// Cuts the direction `from → to`.
    pub fn cut(&self, from: usize, to: usize) {
        self.cuts.0.lock().unwrap().insert((from, to));
    }

    /// Cuts both directions between `node` and every other node.
    pub fn isolate(&self, node: usize) {
        for other in (0..self.nodes).filter(|&o| o != node) {
            self.cut(node, other);
            self.cut(other, node);
        }
    }

    /// Heals every cut.
    pub fn heal(&self) {
        self.cuts.0.lock().unwrap().clear();
    }
}

/// The node a source IP belongs to, if it is one of the block's nodes.
fn node_of(block: u8, ip: IpAddr) -> Option<usize> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            (a == 127 && b == block && c == 0 && d > 0).then(|| usize::from(d) - 1)
        }
        IpAddr::V6(_) => None,
    }
}

fn real(block: u8, i: usize, port: u16) -> SocketAddr {
    SocketAddr::from(([127, block, 0, i as u8 + 1], port))
}

/// Datagrams to node `to`'s proxy: relayed to it through the sender's pair
/// socket, unless the direction is cut.
async fn gossip_proxy(
    socket: UdpSocket,
    block: u8,
    to: usize,
    relays: Vec<Option<Arc<UdpSocket>>>,
    cuts: Arc<Cuts>,
) {
    let mut buffer = vec![0u8; 65_536];
    loop {
        let Ok((len, source)) = socket.recv_from(&mut buffer).await else {
            continue;
        };
        let from = node_of(block, source.ip());
        let Some(relay) = from.and_then(|f| relays.get(f).cloned().flatten()) else {
            continue;
        };
        if !cuts.is_cut(from, Some(to)) {
            let _ = relay
                .send_to(&buffer[..len], real(block, to, GOSSIP_PORT))
                .await;
        }
    }
}

/// The pair socket of nodes `a` and `b`: a datagram from one goes to the
/// other, unless the direction is cut.
async fn relay_pair(relay: Arc<UdpSocket>, block: u8, (a, b): (usize, usize), cuts: Arc<Cuts>) {
    let mut buffer = vec![0u8; 65_536];
    loop {
        let Ok((len, source)) = relay.recv_from(&mut buffer).await else {
            continue;
        };
        let from = node_of(block, source.ip());
        let to = match from {
            Some(f) if f == a => b,
            Some(f) if f == b => a,
            _ => continue,
        };
        if !cuts.is_cut(from, Some(to)) {
            let _ = relay
                .send_to(&buffer[..len], real(block, to, GOSSIP_PORT))
                .await;
        }
    }
}

/// Connections to node `to`'s internode proxy: piped to its real port,
/// each direction held back while cut.
async fn internode_proxy(listener: TcpListener, block: u8, to: usize, cuts: Arc<Cuts>) {
    loop {
        let Ok((inbound, source)) = listener.accept().await else {
            continue;
        };
        let from = node_of(block, source.ip());
        let cuts = cuts.clone();
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(real(block, to, INTERNODE_PORT)).await else {
                return; // the node is down: the caller sees the connection close
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            let forth = pipe(in_read, out_write, cuts.clone(), from, Some(to));
            let back = pipe(out_read, in_write, cuts, Some(to), from);
            // Either side closing ends both.
            tokio::select! {
                () = forth => {}
                () = back => {}
            }
        });
    }
}

/// Copies `from`'s bytes to `to`, holding each chunk while `sender →
/// receiver` is cut.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cuts: Arc<Cuts>,
    sender: Option<usize>,
    receiver: Option<usize>,
) {
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let len = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(len) => len,
        };
        while cuts.is_cut(sender, receiver) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if to.write_all(&buffer[..len]).await.is_err() {
            return;
        }
    }
}
