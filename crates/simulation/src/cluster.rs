//! A cluster of real nodes on turmoil: each node a host whose software is
//! `ringstore_node::start_on` with a simulated platform, its disk and clock
//! kept by the cluster so they outlive crashes. A node's disk is two parts:
//! an engine standing in for sled ([`SimulatedDisk`]) and a file system
//! ([`SimulatedFileSystem`]) on which the node's real commit log and runs
//! keep their files.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ringstore_node::NodeConfig;
use ringstore_node::config::{DurabilityMode, FailureDetection, RepairConfig};
use ringstore_node::platform::{Disk, Keepalive, Network, Platform};
use ringstore_storage::{SimulatedDisk, SimulatedFileSystem};
use tempfile::TempDir;
use turmoil::Sim;

use crate::net::TurmoilTransport;
use crate::time::{ClockSkew, EPOCH_MICROS, NodeClock, SimTime};

/// Ports every node listens on (each node has its own address).
const GOSSIP_PORT: u16 = 7000;
const CLIENT_PORT: u16 = 7100;
const INTERNODE_PORT: u16 = 7101;
/// Seconds between each node's Paxos repairs (a run's load lasts 30 s).
const PAXOS_REPAIR_EVERY_SECONDS: u64 = 4;

/// How the simulated network and time behave.
#[derive(Clone, Debug)]
pub struct NetworkSettings {
    /// Simulated time per step.
    pub tick: Duration,
    /// The fastest a message crosses a link.
    pub min_latency: Duration,
    /// The slowest (the distribution is exponential between the two).
    pub max_latency: Duration,
    /// Simulated time after which the run is abandoned as hung.
    pub limit: Duration,
    /// How every connection (the nodes' and the workers') detects a peer
    /// that stopped answering.
    pub keepalive: Keepalive,
}

impl Default for NetworkSettings {
    fn default() -> Self {
        NetworkSettings {
            tick: Duration::from_millis(1),
            min_latency: Duration::from_micros(200),
            max_latency: Duration::from_millis(10),
            limit: Duration::from_secs(600),
            keepalive: TurmoilTransport::KEEPALIVE,
        }
    }
}

/// One node of the cluster, as the cluster keeps it across crashes.
pub struct SimNode {
    /// Its host name in the simulation (`node0`, …).
    pub name: String,
    /// Its address.
    pub ip: IpAddr,
    /// What it starts with.
    pub config: NodeConfig,
    /// Its engine's disk, which a crash loses the unflushed writes of.
    pub disk: SimulatedDisk,
    /// The files of its commit log and runs, which a crash loses the
    /// unsynced writes of.
    pub files: SimulatedFileSystem,
    /// How far its clock is off.
    pub skew: ClockSkew,
    /// Whether its software runs (not crashed).
    pub running: bool,
    /// Whether its host exists in the simulation (it started once).
    registered: bool,
}

impl SimNode {
    /// Its client port's address.
    pub fn client_address(&self) -> SocketAddr {
        SocketAddr::new(self.ip, CLIENT_PORT)
    }

    /// Its internode port's address.
    pub fn internode_address(&self) -> SocketAddr {
        SocketAddr::new(self.ip, INTERNODE_PORT)
    }

    /// Whether its host exists in the simulation (it was started once).
    pub fn registered(&self) -> bool {
        self.registered
    }
}

/// Real nodes on a simulated network, stepped by the caller.
pub struct SimCluster<'a> {
    /// The simulation: hosts, network, time.
    pub sim: Sim<'a>,
    /// Its time, as the nodes' clocks read it.
    pub time: SimTime,
    /// The nodes, by index.
    pub nodes: Vec<SimNode>,
    /// How the network behaves (the faults restore it).
    pub network: NetworkSettings,
    /// The client hosts' names.
    clients: Vec<String>,
    /// The nodes' data directories (their `node.json`).
    dir: TempDir,
}

impl<'a> SimCluster<'a> {
    /// A simulation seeded with `seed` holding `nodes` node hosts (not
    /// started: see [`SimCluster::start`]). Node 0 is every node's seed.
    pub fn new(seed: u64, nodes: usize, network: &NetworkSettings) -> SimCluster<'a> {
        let epoch = UNIX_EPOCH + Duration::from_micros(EPOCH_MICROS as u64);
        let sim = turmoil::Builder::new()
            .rng_seed(seed)
            .epoch(epoch)
            .tick_duration(network.tick)
            .min_message_latency(network.min_latency)
            .max_message_latency(network.max_latency)
            .simulation_duration(network.limit)
            .tcp_capacity(1024)
            .udp_capacity(1024)
            .build();
        let dir = tempfile::tempdir().expect("a temporary directory for the nodes' files");
        let mut cluster = SimCluster {
            sim,
            time: SimTime::default(),
            nodes: Vec::new(),
            network: network.clone(),
            clients: Vec::new(),
            dir,
        };
        for i in 0..nodes {
            cluster.add_node(i);
        }
        cluster
    }

    /// Adds node `i` (its address fixed now, its software not started).
    fn add_node(&mut self, i: usize) {
        let name = format!("node{i}");
        let ip = self.sim.lookup(name.as_str());
        let seed_ip = self.nodes.first().map_or(ip, |first| first.ip);
        let config = NodeConfig {
            cluster_name: "simulation".into(),
            data_dir: self.dir.path().join(&name),
            listen_address: SocketAddr::new(ip, CLIENT_PORT),
            internode_address: SocketAddr::new(ip, INTERNODE_PORT),
            gossip_address: SocketAddr::new(ip, GOSSIP_PORT),
            seeds: vec![SocketAddr::new(seed_ip, GOSSIP_PORT)],
            rack: format!("rack{}", i % 3 + 1),
            metrics_enabled: false,
            ring_delay_ms: 500,
            failure_detection: FailureDetection::Lan,
            // Paxos repair every few seconds of the run, so that the
            // linearizability checker judges compare-and-sets racing
            // repair rounds, rising floors and purges, faults included.
            repair: RepairConfig {
                paxos_repair_interval_seconds: PAXOS_REPAIR_EVERY_SECONDS,
                ..RepairConfig::default()
            },
            ..NodeConfig::default()
        };
        debug_assert_eq!(config.storage.durability, DurabilityMode::Batch);
        self.nodes.push(SimNode {
            name,
            ip,
            config,
            disk: SimulatedDisk::new(),
            files: SimulatedFileSystem::new(),
            skew: ClockSkew::default(),
            running: false,
            registered: false,
        });
    }

    /// Starts node `i`'s software: a fresh node joins, a crashed one
    /// restarts on what its disk kept.
    pub fn start(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if node.running {
            return;
        }
        if node.registered {
            self.sim.bounce(node.name.as_str());
        } else {
            let keepalive = self.network.keepalive;
            let software = node_software(node, &self.time, keepalive);
            self.sim.host(node.name.as_str(), software);
            node.registered = true;
        }
        node.running = true;
    }

    /// Crashes node `i`: its software stops at once, as a power loss
    /// would, and its disk loses what was not flushed or synced.
    pub fn crash(&mut self, i: usize) {
        self.crash_tearing(i, None);
    }

    /// [`SimCluster::crash`], and with `tear` (a seed) each of the node's
    /// files keeps a prefix of its unsynced writes, the last one torn
    /// ([`SimulatedFileSystem::crash`]).
    pub fn crash_tearing(&mut self, i: usize, tear: Option<u64>) {
        let node = &mut self.nodes[i];
        if !node.running {
            return;
        }
        self.sim.crash(node.name.as_str());
        node.disk.crash();
        node.files.crash(tear);
        node.running = false;
    }

    /// Adds a client host called `name` running `software`; the run ends
    /// when every client's software has.
    pub fn add_client(
        &mut self,
        name: &str,
        software: impl Future<Output = turmoil::Result> + 'static,
    ) {
        self.sim.client(name, software);
        self.clients.push(name.to_string());
    }

    /// The client hosts' names.
    pub fn client_hosts(&self) -> Vec<String> {
        self.clients.clone()
    }

    /// One step of the simulation; whether every client is done.
    pub fn step(&mut self) -> Result<bool, String> {
        let finished = self.sim.step().map_err(|error| error.to_string())?;
        self.time.set(self.sim.elapsed());
        Ok(finished)
    }

    /// The simulation's elapsed time.
    pub fn elapsed(&self) -> Duration {
        self.sim.elapsed()
    }

    /// The wall-clock time of the simulation's start.
    pub fn epoch() -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(EPOCH_MICROS as u64)
    }
}

/// The software of a node host: start the node on the simulated platform,
/// run until it asks to stop (after a decommission), then shut down.
fn node_software(
    node: &SimNode,
    time: &SimTime,
    keepalive: Keepalive,
) -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = turmoil::Result>>> + 'static {
    let (config, disk, files, skew, time) = (
        node.config.clone(),
        node.disk.clone(),
        node.files.clone(),
        node.skew.clone(),
        time.clone(),
    );
    move || {
        let platform = Platform {
            network: Network::Simulated(Arc::new(TurmoilTransport { keepalive })),
            clock: Arc::new(NodeClock {
                time: time.clone(),
                skew: skew.clone(),
            }),
            disk: Disk::Simulated {
                engine: Arc::new(disk.clone()),
                files: Arc::new(files.clone()),
            },
        };
        let config = config.clone();
        Box::pin(async move {
            let node = ringstore_node::start_on(config, platform).await?;
            node.stop_requested().await;
            node.shutdown().await?;
            Ok(())
        })
    }
}
