//! The nemesis: faults drawn from the run's seed, applied and healed by
//! the driver between simulation steps, one node at a time.
//!
//! Each fault hits one node for a while: the others and the clients see
//! it the way they would see the real thing.
//!
//! | kind | what is done | what it models |
//! |---|---|---|
//! | `Crash` | the node's host is dropped at once, its engine loses what was not flushed and its files what was not synced; restarted at the end | a power loss |
//! | `TornCrash` | the same, but each file keeps a prefix of its unsynced writes, the last one cut short | a power loss in the middle of a write |
//! | `BitRot` | crashed, then bits flipped in its stored cells and files (about one value in 20, one bit per 4 KiB of file); restarted at the end, damage and all | a disk returning bytes that are not what was written |
//! | `IoErrors` | its file writes and syncs fail with `EIO` and its engine's flushes fail, or reads of its files fail with `EIO`; at the end it is restarted on a mended disk | a failing disk |
//! | `Partition` | every message between the node and the other nodes is held, then delivered at the end | a partition TCP outlives; how others see a paused process |
//! | `Flap` | the same, on and off every few hundred milliseconds | a flapping link or process |
//! | `Pause` | every message to and from the node, the clients' included, is held, then delivered at the end | a paused process (`SIGSTOP`, a long GC pause) with requests waiting in its socket buffers |
//! | `DropOutgoing`, `DropIncoming` | messages from (to) the node to (from) the other nodes are lost | a one-way failure; connections stall until their keep-alive gives up |
//! | `SlowLinks` | the node's links take 50–250 ms | a slow or overloaded node |
//! | `ClockDrift` | the node's clock is off by less than the clock bound | ordinary drift, which last-write-wins must tolerate |
//! | `ClockJump` | its clock jumps ahead or back by more than the bound | the node must refuse to coordinate writes |
//! | `DiskFull` | its engine refuses writes and flushes and its files cannot grow; at the end it has room and the node is restarted | a full disk, an operator freeing space |
//!
//! But for `Pause`, the clients keep reaching every node: only traffic
//! between nodes is cut, so a cut-off node still coordinates (and must fail
//! or hint, never acknowledge what it cannot make durable on a quorum). A
//! paused node reads its clients' requests only at the end, after they
//! gave up: it must refuse the writes among them, not stamp them then.

use std::fmt;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_history::{FaultWindow, NodeId};
use ringstore_storage::file_system::{FileFaults, IoFault};

use crate::cluster::SimCluster;

/// The clock bound the nodes run with (`max_clock_offset_ms`, default).
pub const CLOCK_BOUND: Duration = Duration::from_millis(500);

/// What a fault does (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Killed, and restarted at the end.
    Crash,
    /// Killed in the middle of writes, which are torn; restarted at the end.
    TornCrash,
    /// Killed, its stored bytes damaged, and restarted at the end.
    BitRot,
    /// Its disk fails writes or reads with `EIO`; restarted on a mended
    /// disk at the end.
    IoErrors,
    /// Cut off from the other nodes; the messages arrive at the end.
    Partition,
    /// Cut off and back, repeatedly.
    Flap,
    /// Nothing in or out, clients included; it all arrives at the end.
    Pause,
    /// Its messages to the other nodes are lost.
    DropOutgoing,
    /// The other nodes' messages to it are lost.
    DropIncoming,
    /// Its links are slow.
    SlowLinks,
    /// Its clock drifts within the bound.
    ClockDrift,
    /// Its clock jumps past the bound.
    ClockJump,
    /// Its disk is full; restarted with room at the end.
    DiskFull,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 13] = [
        FaultKind::Crash,
        FaultKind::TornCrash,
        FaultKind::BitRot,
        FaultKind::IoErrors,
        FaultKind::Partition,
        FaultKind::Flap,
        FaultKind::Pause,
        FaultKind::DropOutgoing,
        FaultKind::DropIncoming,
        FaultKind::SlowLinks,
        FaultKind::ClockDrift,
        FaultKind::ClockJump,
        FaultKind::DiskFull,
    ];

    /// Whether the node may stop answering its peers or clients, so that
    /// requests time out until the others mark it down.
    pub fn makes_unresponsive(self) -> bool {
        !matches!(self, FaultKind::ClockDrift | FaultKind::ClockJump)
    }

    /// Whether the node is cut off from the others (in at least one
    /// direction), long enough to declare them down.
    pub fn isolates(self) -> bool {
        matches!(
            self,
            FaultKind::Partition
                | FaultKind::Flap
                | FaultKind::Pause
                | FaultKind::DropOutgoing
                | FaultKind::DropIncoming
        )
    }
}

/// One fault: its kind, node, start and length, and its parameter.
#[derive(Clone, Debug)]
pub struct Fault {
    /// What it does.
    pub kind: FaultKind,
    /// The node it hits.
    pub node: usize,
    /// When it starts, since the start of the load.
    pub at: Duration,
    /// How long it lasts.
    pub length: Duration,
    /// The skew (`ClockDrift`, `ClockJump`) or the latency (`SlowLinks`);
    /// whether a skew is ahead.
    pub amount: Duration,
    /// Whether a skew puts the clock ahead.
    pub ahead: bool,
    /// Where a torn write is cut and which bits rot (`TornCrash`, `BitRot`).
    pub seed: u64,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let amount = match self.kind {
            FaultKind::ClockDrift | FaultKind::ClockJump => format!(
                " {}{} ms",
                if self.ahead { "+" } else { "-" },
                self.amount.as_millis()
            ),
            FaultKind::SlowLinks => format!(" {} ms", self.amount.as_millis()),
            _ => String::new(),
        };
        write!(
            f,
            "{:?}{amount} node{} at +{:.3}s for {:.3}s",
            self.kind,
            self.node,
            self.at.as_secs_f64(),
            self.length.as_secs_f64()
        )
    }
}

/// Faults one after another over `load` of simulated time, starting a
/// little into it and healed before its end, kinds drawn from `kinds`,
/// nodes from `nodes`; all drawn from `seed`.
pub fn schedule(seed: u64, kinds: &[FaultKind], nodes: &[usize], load: Duration) -> Vec<Fault> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7321);
    let mut faults = Vec::new();
    let mut at = Duration::from_millis(rng.random_range(1_000..3_000));
    let last_end = load.saturating_sub(Duration::from_secs(3));
    while !kinds.is_empty() {
        let kind = kinds[rng.random_range(0..kinds.len())];
        let length = Duration::from_millis(rng.random_range(3_000..7_000));
        if at + length > last_end {
            break;
        }
        let (amount, ahead) = match kind {
            FaultKind::ClockDrift => (
                Duration::from_millis(rng.random_range(50..CLOCK_BOUND.as_millis() as u64 - 50)),
                rng.random_bool(0.5),
            ),
            FaultKind::ClockJump => (
                Duration::from_millis(rng.random_range(2_000..8_000)),
                rng.random_bool(0.5),
            ),
            FaultKind::SlowLinks => (Duration::from_millis(rng.random_range(50..250)), true),
            _ => (Duration::ZERO, true),
        };
        faults.push(Fault {
            kind,
            node: nodes[rng.random_range(0..nodes.len())],
            at,
            length,
            amount,
            ahead,
            seed: rng.random(),
        });
        at += length + Duration::from_millis(rng.random_range(1_000..3_000));
    }
    faults
}

/// The fault as the history checker names it, in the run's times.
pub fn window(fault: &Fault, load_start: Duration) -> FaultWindow {
    let from = load_start + fault.at;
    FaultWindow {
        label: fault.to_string(),
        node: NodeId(fault.node),
        from,
        until: Some(from + fault.length),
    }
}

/// Starts `fault` on the cluster.
pub fn apply(cluster: &mut SimCluster<'_>, fault: &Fault) {
    let node = fault.node;
    match fault.kind {
        FaultKind::Crash => cluster.crash(node),
        FaultKind::TornCrash => cluster.crash_tearing(node, Some(fault.seed)),
        FaultKind::BitRot => {
            cluster.crash(node);
            rot(cluster, node, fault.seed);
        }
        FaultKind::IoErrors => {
            // Half the time its writes fail (the engine's flushes too),
            // half the time reads of its files (runs, the log at a restart).
            let fails = if fault.seed.is_multiple_of(2) {
                cluster.nodes[node].disk.set_full(true);
                IoFault::Writes
            } else {
                IoFault::Reads
            };
            cluster.nodes[node].files.set_faults(FileFaults {
                full: false,
                io_errors: Some(fails),
            });
        }
        FaultKind::Partition | FaultKind::Flap => cut(cluster, node, true),
        FaultKind::Pause => pause(cluster, node, true),
        FaultKind::DropOutgoing => drop_between(cluster, node, true, true),
        FaultKind::DropIncoming => drop_between(cluster, node, false, true),
        FaultKind::SlowLinks => slow_links(cluster, node, Some(fault.amount)),
        FaultKind::ClockDrift | FaultKind::ClockJump => {
            cluster.nodes[node].skew.set(fault.amount, fault.ahead);
        }
        FaultKind::DiskFull => {
            cluster.nodes[node].disk.set_full(true);
            cluster.nodes[node].files.set_faults(FileFaults {
                full: true,
                io_errors: None,
            });
        }
    }
}

/// Damages the stored bytes of `node` (which is down): about one stored
/// cell in 20 of its keyspaces' trees, and one bit per 4 KiB of its commit
/// log and run files. The system tree, hints and the node's identity are
/// spared: damage there stops a node from starting, which is
/// `disk_failure_policy`'s business, not the read path's.
fn rot(cluster: &mut SimCluster<'_>, node: usize, seed: u64) {
    let node = &cluster.nodes[node];
    let cells = node
        .disk
        .flip_bits(seed, 20, |tree| tree.starts_with("data/"));
    let bits = node.files.flip_bits(seed, 4096, |_| true);
    tracing::info!(node = %node.name, cells, bits, "bits flipped on the disk");
}

/// What a fault does at simulated time `elapsed` while it lasts (`Flap`
/// toggles its cut every 300 ms; the others stay as applied).
pub fn during(cluster: &mut SimCluster<'_>, fault: &Fault, since_start: Duration) {
    if fault.kind == FaultKind::Flap {
        let cut_now = (since_start.as_millis() / 300).is_multiple_of(2);
        cut(cluster, fault.node, cut_now);
    }
}

/// Heals `fault`.
pub fn heal(cluster: &mut SimCluster<'_>, fault: &Fault) {
    let node = fault.node;
    match fault.kind {
        FaultKind::Crash | FaultKind::TornCrash | FaultKind::BitRot => cluster.start(node),
        FaultKind::Partition | FaultKind::Flap => cut(cluster, node, false),
        FaultKind::Pause => pause(cluster, node, false),
        FaultKind::DropOutgoing => drop_between(cluster, node, true, false),
        FaultKind::DropIncoming => drop_between(cluster, node, false, false),
        FaultKind::SlowLinks => slow_links(cluster, node, None),
        FaultKind::ClockDrift | FaultKind::ClockJump => cluster.nodes[node].skew.clear(),
        FaultKind::DiskFull | FaultKind::IoErrors => {
            cluster.nodes[node].disk.set_full(false);
            cluster.nodes[node].files.set_faults(FileFaults::default());
            cluster.crash(node);
            cluster.start(node);
        }
    }
}

/// The other nodes' names (those whose hosts exist: started once).
fn others(cluster: &SimCluster<'_>, node: usize) -> Vec<String> {
    (0..cluster.nodes.len())
        .filter(|&other| other != node && cluster.nodes[other].registered())
        .map(|other| cluster.nodes[other].name.clone())
        .collect()
}

/// Holds (or releases) every message between `node` and the other nodes.
fn cut(cluster: &mut SimCluster<'_>, node: usize, hold: bool) {
    let name = cluster.nodes[node].name.clone();
    for other in others(cluster, node) {
        if hold {
            cluster.sim.hold(name.as_str(), other.as_str());
        } else {
            cluster.sim.release(name.as_str(), other.as_str());
        }
    }
}

/// Holds (or releases) every message between `node` and every other host,
/// the clients' included.
fn pause(cluster: &mut SimCluster<'_>, node: usize, hold: bool) {
    cut(cluster, node, hold);
    let name = cluster.nodes[node].name.clone();
    for client in cluster.client_hosts() {
        if hold {
            cluster.sim.hold(name.as_str(), client.as_str());
        } else {
            cluster.sim.release(name.as_str(), client.as_str());
        }
    }
}

/// Drops (or stops dropping) messages from `node` to the others
/// (`outgoing`) or from the others to it.
fn drop_between(cluster: &mut SimCluster<'_>, node: usize, outgoing: bool, dropping: bool) {
    let name = cluster.nodes[node].name.clone();
    for other in others(cluster, node) {
        let (from, to) = if outgoing {
            (name.as_str(), other.as_str())
        } else {
            (other.as_str(), name.as_str())
        };
        if dropping {
            cluster.sim.partition_oneway(from, to);
        } else {
            cluster.sim.repair_oneway(from, to);
        }
    }
}

/// Sets every link of `node` (to the nodes and the clients) to `latency`,
/// or back to the network's usual latencies.
fn slow_links(cluster: &mut SimCluster<'_>, node: usize, latency: Option<Duration>) {
    let name = cluster.nodes[node].name.clone();
    let mut peers = others(cluster, node);
    peers.extend(cluster.client_hosts());
    let (min, max) = match latency {
        Some(latency) => (latency, latency),
        None => (cluster.network.min_latency, cluster.network.max_latency),
    };
    for other in peers {
        cluster
            .sim
            .set_link_latency(name.as_str(), other.as_str(), min);
        cluster
            .sim
            .set_link_max_message_latency(name.as_str(), other.as_str(), max);
    }
}
