//! A deterministic in-memory network for membership tests and measurements.
//!
//! Runs many [`Membership`] state machines against a simulated clock and a
//! simulated network whose links can drop, delay and be cut. Everything
//! random comes from one seed, so a scenario replays exactly. It drives the
//! same code as the UDP agent: only the socket and the timer wheel differ.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_identity::NodeKeys;
use ringstore_placement::HostId;

use crate::clock::{Clock, WallTime};
use crate::config::MembershipConfig;
use crate::identity::{Generation, NodeIdentity};
use crate::metadata::{MetadataStamp, NodeMetadata, SignedMetadata};
use crate::remembrance::Remembrance;
use crate::state_machine::{Membership, MembershipEvent, Output, Timer};
use crate::view::{ClusterView, Liveness};

/// How the simulated network treats every packet.
#[derive(Clone, Copy, Debug)]
pub struct LinkModel {
    /// Probability that a packet is lost, in [0, 1).
    pub drop_probability: f64,
    /// Shortest one-way delay.
    pub min_delay: Duration,
    /// Longest one-way delay (uniform in between).
    pub max_delay: Duration,
}

impl LinkModel {
    /// A healthy LAN: no loss, 0.1–2 ms.
    pub fn lan() -> LinkModel {
        LinkModel {
            drop_probability: 0.0,
            min_delay: Duration::from_micros(100),
            max_delay: Duration::from_millis(2),
        }
    }
}

/// The simulated wall time at simulated time zero: 2026-01-01T00:00:00Z.
pub const SIM_EPOCH_MICROS: i64 = 1_767_225_600_000_000;

/// A simulated node's clock: the simulation's time plus the node's offset.
struct SimClock {
    now_nanos: Arc<AtomicU64>,
    offset_micros: Arc<AtomicI64>,
}

impl Clock for SimClock {
    fn wall(&self) -> WallTime {
        let micros = (self.monotonic().as_micros()) as i64;
        WallTime(SIM_EPOCH_MICROS + micros + self.offset_micros.load(Ordering::Relaxed))
    }

    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.now_nanos.load(Ordering::Relaxed))
    }
}

/// A simulated node.
pub struct SimNode {
    /// Its gossip address.
    pub addr: SocketAddr,
    /// Its host id.
    pub host_id: HostId,
    config: MembershipConfig,
    metadata: NodeMetadata,
    /// Bumped on every kill and restart, so timers of a dead incarnation are ignored.
    incarnation: u64,
    membership: Option<Membership>,
    /// Its keys (kept across restarts, as the node's key file is).
    keys: Arc<NodeKeys>,
    /// Its clock's offset from the simulation's time, in microseconds.
    clock_offset: Arc<AtomicI64>,
    /// Every event the node reported, with when.
    pub events: Vec<(Duration, MembershipEvent)>,
}

impl SimNode {
    /// Whether it is running.
    pub fn is_running(&self) -> bool {
        self.membership.is_some()
    }
}

enum Due {
    Deliver {
        to: usize,
        from: SocketAddr,
        packet: Vec<u8>,
    },
    Timer {
        node: usize,
        incarnation: u64,
        timer: Timer,
    },
}

struct Scheduled {
    at: Duration,
    seq: u64,
    due: Due,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The simulation: nodes, a clock and a network.
pub struct Simulation {
    now: Duration,
    rng: StdRng,
    seq: u64,
    queue: BinaryHeap<Reverse<Scheduled>>,
    nodes: Vec<SimNode>,
    by_addr: HashMap<SocketAddr, usize>,
    /// The network's behaviour; may be changed at any time.
    pub link: LinkModel,
    blocked: BTreeSet<(usize, usize)>,
    /// Links whose packets are held, not delivered, until [`Simulation::release`].
    held_links: BTreeSet<(usize, usize)>,
    /// The packets held on them, in the order they were sent.
    held: Vec<(usize, SocketAddr, Vec<u8>)>,
    /// `now`, shared with the nodes' clocks.
    clock: Arc<AtomicU64>,
}

impl Simulation {
    /// An empty simulation at time zero.
    pub fn new(seed: u64, link: LinkModel) -> Simulation {
        Simulation {
            now: Duration::ZERO,
            rng: StdRng::seed_from_u64(seed),
            seq: 0,
            queue: BinaryHeap::new(),
            nodes: Vec::new(),
            by_addr: HashMap::new(),
            link,
            blocked: BTreeSet::new(),
            held_links: BTreeSet::new(),
            held: Vec::new(),
            clock: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The simulated time.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// Starts a node with `config` and `metadata` (its host id, gossip address
    /// and generation come from the metadata). Returns its index.
    pub fn add_node(&mut self, config: MembershipConfig, metadata: NodeMetadata) -> usize {
        let keys = Arc::new(NodeKeys::for_test(self.nodes.len() as u64 + 1));
        self.add_node_with_keys(config, metadata, keys)
    }

    /// Starts a node as [`Simulation::add_node`] does, with its own `keys`
    /// (a node whose host id is derived from them, as a real node's is).
    pub fn add_node_with_keys(
        &mut self,
        config: MembershipConfig,
        metadata: NodeMetadata,
        keys: Arc<NodeKeys>,
    ) -> usize {
        let index = self.push_node(config, metadata, keys);
        self.boot(index, None);
        index
    }

    /// Starts nodes at once, each remembering every one's signed record, as
    /// nodes restarted with their data directories do: a whole cluster
    /// restarted together. Every view holds the whole ring from the start
    /// and only liveness has to be found, so a big cluster needs no storm
    /// of metadata (each of n nodes learning n records and rebuilding its
    /// ring each time, which the simulator pays n times over). Returns
    /// their indexes.
    pub fn add_nodes_remembering(
        &mut self,
        nodes: Vec<(MembershipConfig, NodeMetadata)>,
    ) -> Vec<usize> {
        let first = self.nodes.len();
        let records: Vec<SignedMetadata> = nodes
            .iter()
            .enumerate()
            .map(|(k, (_, metadata))| {
                let keys = NodeKeys::for_test((first + k) as u64 + 1);
                let mut metadata = metadata.clone();
                metadata.keys = keys.public();
                metadata.sign(&keys)
            })
            .collect();
        let memory = Remembrance {
            records,
            claims: Vec::new(),
        };
        let indexes: Vec<usize> = nodes
            .into_iter()
            .map(|(config, metadata)| {
                let keys = Arc::new(NodeKeys::for_test(self.nodes.len() as u64 + 1));
                self.push_node(config, metadata, keys)
            })
            .collect();
        for &index in &indexes {
            self.boot(index, Some(&memory));
        }
        indexes
    }

    fn push_node(
        &mut self,
        config: MembershipConfig,
        metadata: NodeMetadata,
        keys: Arc<NodeKeys>,
    ) -> usize {
        let index = self.nodes.len();
        self.by_addr.insert(metadata.gossip_addr, index);
        self.nodes.push(SimNode {
            addr: metadata.gossip_addr,
            host_id: metadata.host_id,
            config,
            metadata,
            incarnation: 0,
            membership: None,
            keys,
            clock_offset: Arc::new(AtomicI64::new(0)),
            events: Vec::new(),
        });
        index
    }

    fn boot(&mut self, index: usize, memory: Option<&Remembrance>) {
        let node = &mut self.nodes[index];
        node.incarnation += 1;
        let identity = NodeIdentity {
            host_id: node.host_id,
            gossip_addr: node.addr,
            generation: node.metadata.stamp.generation,
            rejoin: 0,
        };
        let seed = self.rng.random();
        let clock = SimClock {
            now_nanos: self.clock.clone(),
            offset_micros: node.clock_offset.clone(),
        };
        let mut membership = Membership::new(
            node.config.clone(),
            identity,
            node.metadata.clone(),
            node.keys.clone(),
            seed,
        )
        .with_clock(Arc::new(clock));
        if let Some(memory) = memory {
            membership = membership.with_remembered(memory.clone());
        }
        node.membership = Some(membership);
        self.flush(index);
    }

    /// Stops node `index` abruptly (its packets and timers are lost).
    pub fn kill(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        node.membership = None;
        node.incarnation += 1;
    }

    /// Restarts a killed node with the next generation (as a real restart does),
    /// keeping its host id and its last metadata.
    pub fn restart(&mut self, index: usize) {
        if let Some(membership) = &self.nodes[index].membership {
            let current = membership.view().members[&self.nodes[index].host_id]
                .metadata
                .clone();
            self.nodes[index].metadata = NodeMetadata::clone(&current);
        }
        self.kill(index);
        let metadata = &mut self.nodes[index].metadata;
        metadata.stamp = MetadataStamp {
            generation: Generation(metadata.stamp.generation.0 + 1),
            version: 1,
        };
        self.boot(index, None);
    }

    /// Changes node `index`'s metadata as the node itself would.
    pub fn update_local(&mut self, index: usize, change: impl FnOnce(&mut NodeMetadata)) {
        let host = self.nodes[index].host_id;
        let membership = self.nodes[index]
            .membership
            .as_mut()
            .expect("a running node");
        membership.update_local(change);
        self.nodes[index].metadata =
            NodeMetadata::clone(&membership.view().members[&host].metadata);
        self.flush(index);
    }

    /// Has node `index` ask node `from` for its copies of `hosts`' records
    /// ([`Membership::pull`]).
    pub fn pull(&mut self, index: usize, from: usize, hosts: &[HostId]) {
        let address = self.nodes[from].addr;
        self.nodes[index]
            .membership
            .as_mut()
            .expect("a running node")
            .pull(address, hosts);
        self.flush(index);
    }

    /// Sets node `index`'s clock to read `offset` ahead of the simulation's
    /// time (behind, if negative), in microseconds; takes effect at once, as
    /// a clock step does.
    pub fn set_clock_offset(&mut self, index: usize, offset_micros: i64) {
        self.nodes[index]
            .clock_offset
            .store(offset_micros, Ordering::Relaxed);
    }

    /// Cuts every link between the two groups, both ways.
    pub fn partition(&mut self, a: &[usize], b: &[usize]) {
        for &x in a {
            for &y in b {
                self.blocked.insert((x, y));
                self.blocked.insert((y, x));
            }
        }
    }

    /// Holds every packet between the two groups, both ways, until
    /// [`Simulation::release`]: a paused process whose peers' packets wait
    /// in its socket buffer, and whose own wait to be sent.
    pub fn hold(&mut self, a: &[usize], b: &[usize]) {
        for &x in a {
            for &y in b {
                self.held_links.insert((x, y));
                self.held_links.insert((y, x));
            }
        }
    }

    /// Delivers every held packet now, in the order sent, and holds no more.
    pub fn release(&mut self) {
        self.held_links.clear();
        for (to, from, packet) in std::mem::take(&mut self.held) {
            self.push(self.now, Due::Deliver { to, from, packet });
        }
    }

    /// Restores every cut link.
    pub fn heal(&mut self) {
        self.blocked.clear();
    }

    /// Delivers `packet` to node `index` as if sent from `from`.
    pub fn inject(&mut self, index: usize, from: SocketAddr, packet: Vec<u8>) {
        self.push(
            self.now,
            Due::Deliver {
                to: index,
                from,
                packet,
            },
        );
    }

    /// The nodes.
    pub fn nodes(&self) -> &[SimNode] {
        &self.nodes
    }

    /// Node `index`'s membership, if running.
    pub fn membership(&self, index: usize) -> Option<&Membership> {
        self.nodes[index].membership.as_ref()
    }

    /// Datagrams sent by the nodes running now, since each started.
    pub fn packets_sent(&self) -> u64 {
        self.running().map(|m| m.stats().packets_sent).sum()
    }

    /// Bytes sent by the nodes running now, since each started.
    pub fn bytes_sent(&self) -> u64 {
        self.running().map(|m| m.stats().bytes_sent).sum()
    }

    fn running(&self) -> impl Iterator<Item = &Membership> {
        self.nodes
            .iter()
            .filter_map(|node| node.membership.as_ref())
    }

    /// Node `index`'s view; panics if it is not running.
    pub fn view(&self, index: usize) -> Arc<ClusterView> {
        self.membership(index).expect("a running node").view()
    }

    /// Runs the simulation for `duration` of simulated time.
    pub fn run_for(&mut self, duration: Duration) {
        let end = self.now + duration;
        while self.step_until(end) {}
        self.set_now(end);
    }

    /// Runs until `done` holds (checked every 50 ms of simulated time) or
    /// `limit` has passed; returns how long it took, or `None` on the limit.
    pub fn run_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&Simulation) -> bool,
    ) -> Option<Duration> {
        let start = self.now;
        let check = Duration::from_millis(50);
        while self.now - start <= limit {
            if done(self) {
                return Some(self.now - start);
            }
            self.run_for(check);
        }
        None
    }

    /// Processes the next event due no later than `end`; false when there is none.
    fn step_until(&mut self, end: Duration) -> bool {
        match self.queue.peek() {
            Some(Reverse(next)) if next.at <= end => {}
            _ => return false,
        }
        let Reverse(Scheduled { at, due, .. }) = self.queue.pop().expect("peeked");
        self.set_now(at);
        match due {
            Due::Deliver { to, from, packet } => {
                if let Some(membership) = self.nodes[to].membership.as_mut() {
                    membership.handle_packet(from, &packet);
                    self.flush(to);
                }
            }
            Due::Timer {
                node,
                incarnation,
                timer,
            } => {
                if self.nodes[node].incarnation == incarnation
                    && let Some(membership) = self.nodes[node].membership.as_mut()
                {
                    membership.handle_timer(timer);
                    self.flush(node);
                }
            }
        }
        true
    }

    fn set_now(&mut self, now: Duration) {
        self.now = now;
        self.clock.store(now.as_nanos() as u64, Ordering::Relaxed);
    }

    fn push(&mut self, at: Duration, due: Due) {
        self.seq += 1;
        self.queue.push(Reverse(Scheduled {
            at,
            seq: self.seq,
            due,
        }));
    }

    fn flush(&mut self, index: usize) {
        let from = self.nodes[index].addr;
        let incarnation = self.nodes[index].incarnation;
        let Some(membership) = self.nodes[index].membership.as_mut() else {
            return;
        };
        for output in membership.drain_outputs() {
            match output {
                Output::Send { to, packet } => {
                    let Some(&target) = self.by_addr.get(&to) else {
                        continue;
                    };
                    if self.held_links.contains(&(index, target)) {
                        self.held.push((target, from, packet));
                        continue;
                    }
                    if self.blocked.contains(&(index, target))
                        || self.rng.random_bool(self.link.drop_probability)
                    {
                        continue;
                    }
                    let spread = (self.link.max_delay - self.link.min_delay).as_nanos() as u64;
                    let delay = self.link.min_delay
                        + Duration::from_nanos(self.rng.random_range(0..=spread));
                    self.push(
                        self.now + delay,
                        Due::Deliver {
                            to: target,
                            from,
                            packet,
                        },
                    );
                }
                Output::Schedule { after, timer } => {
                    self.push(
                        self.now + after,
                        Due::Timer {
                            node: index,
                            incarnation,
                            timer,
                        },
                    );
                }
                Output::Event(event) => self.nodes[index].events.push((self.now, event)),
            }
        }
    }

    /// Whether every running node among `nodes` has the same members with the
    /// same metadata versions, sees the running ones up and the others down,
    /// and has the same ring checksum.
    pub fn converged(&self, nodes: &[usize]) -> bool {
        let running: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|&i| self.nodes[i].is_running())
            .collect();
        let Some(&first) = running.first() else {
            return true;
        };
        let reference = self.view(first);
        let index: HashMap<HostId, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, node)| (node.host_id, i))
            .collect();
        running.iter().all(|&i| {
            let view = self.view(i);
            view.ring.checksum() == reference.ring.checksum()
                && view.members.len() == reference.members.len()
                && view.members.iter().all(|(host, member)| {
                    let Some(other) = reference.members.get(host) else {
                        return false;
                    };
                    let expected = match index.get(host).copied() {
                        Some(j) if self.nodes[j].is_running() => Liveness::Up,
                        _ => Liveness::Down,
                    };
                    member.metadata.stamp == other.metadata.stamp && member.liveness == expected
                })
        })
    }

    /// Whether every running node other than `index` sees it with `liveness`.
    pub fn seen_by_all_as(&self, index: usize, liveness: Liveness) -> bool {
        let host = self.nodes[index].host_id;
        (0..self.nodes.len())
            .filter(|&i| i != index && self.nodes[i].is_running())
            .all(|i| {
                self.view(i)
                    .member(host)
                    .is_some_and(|m| m.liveness == liveness)
            })
    }
}
