//! Faults on real server processes, on a schedule drawn from a seed.
//!
//! A [`FaultCluster`] is the servers of `common::processes`, behind the
//! proxies of `common::netproxy`, with one node's data directory on a small
//! tmpfs when the schedule fills a disk. [`schedule`] draws each fault's
//! node and timing from the seed; [`FaultCluster::inject`] carries one out,
//! holds it, heals it and waits until every node sees every node up again,
//! so at most one node is faulty at a time. Each fault is logged as a
//! [`FaultWindow`] for the history checker and the failure bounds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_history::{FaultWindow, NodeId};

use super::netproxy::Network;
use super::processes::{Processes, eventually, text};

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// SIGKILL, then a restart on the same data.
    Kill,
    /// SIGSTOP, then SIGCONT: shorter than failure detection, or longer.
    Pause,
    /// Several short SIGSTOP/SIGCONT cycles in a row.
    Flap,
    /// Every link to and from the node cut (gossip and internode).
    Isolate,
    /// What the node sends the others dropped; what they send arrives.
    DropOutgoing,
    /// What the others send the node dropped; what it sends arrives.
    DropIncoming,
    /// The node's data directory full (a tmpfs filled up), then freed and
    /// the node restarted: sled keeps the first I/O error it meets for
    /// good, so the node stops (`disk_failure_policy = stop`: no writes, no
    /// gossip) until it is restarted (see
    /// `a_node_whose_disk_fills_up_stops_and_after_a_restart_gets_every_write_it_missed`
    /// in `tests/faults.rs`).
    DiskFull,
}

impl FaultKind {
    /// Whether the node stops answering (or its answers stop arriving), so
    /// requests to it hang until the failure detector marks it down.
    pub fn makes_unresponsive(self) -> bool {
        !matches!(self, FaultKind::DiskFull | FaultKind::Kill)
    }

    /// Whether the node is cut off from the others (in at least one
    /// direction, or by pauses that outlast its probes) long enough to
    /// declare them down: verdicts it spreads once it is back, which the
    /// others hold until their subjects learn of them and rejoin. As the
    /// simulation's `FaultKind::isolates`.
    pub fn isolates(self) -> bool {
        matches!(
            self,
            FaultKind::Isolate
                | FaultKind::Flap
                | FaultKind::DropOutgoing
                | FaultKind::DropIncoming
        )
    }
}

/// One fault of a schedule.
#[derive(Clone, Copy, Debug)]
pub struct Fault {
    pub kind: FaultKind,
    /// The node it is done to.
    pub node: usize,
    /// How long it lasts (a flap: each pause and each run between).
    pub duration: Duration,
    /// The quiet time before it.
    pub gap: Duration,
}

/// The seed: `RINGSTORE_FAULT_SEED` if set, else `default`.
pub fn seed_or(default: u64) -> u64 {
    match std::env::var("RINGSTORE_FAULT_SEED") {
        Ok(seed) => seed
            .parse()
            .unwrap_or_else(|_| panic!("RINGSTORE_FAULT_SEED={seed:?} is not a u64")),
        Err(_) => default,
    }
}

/// One fault of each of `kinds`, in an order, on nodes and with timings
/// drawn from `seed`; nodes from `0..nodes`.
pub fn schedule(seed: u64, kinds: &[FaultKind], nodes: usize) -> Vec<Fault> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut kinds = kinds.to_vec();
    for i in (1..kinds.len()).rev() {
        kinds.swap(i, rng.random_range(0..=i));
    }
    kinds
        .into_iter()
        .map(|kind| {
            let millis = match kind {
                FaultKind::Kill => rng.random_range(500..3000),
                // Half shorter than failure detection (~5 s), half longer.
                FaultKind::Pause if rng.random_bool(0.5) => rng.random_range(300..2500),
                FaultKind::Pause => rng.random_range(6000..9000),
                FaultKind::Flap => rng.random_range(150..700),
                // Mostly past failure detection: before it, reads that ask the
                // cut-off node wait `read_ms` (there is no speculative retry).
                FaultKind::Isolate | FaultKind::DropOutgoing | FaultKind::DropIncoming => {
                    rng.random_range(3000..9000)
                }
                FaultKind::DiskFull => rng.random_range(2000..4000),
            };
            Fault {
                kind,
                node: rng.random_range(0..nodes),
                duration: Duration::from_millis(millis),
                gap: Duration::from_millis(rng.random_range(300..1500)),
            }
        })
        .collect()
}

/// A tmpfs mounted on a directory, unmounted when dropped.
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB on `dir` (created), or says why not.
    pub fn mount(dir: &Path, mib: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !mounted.status.success() {
            return Err(format!("mount: {}", text(&mounted.stderr).trim()));
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    fn filler(&self) -> PathBuf {
        self.dir.join("disk-full-filler")
    }

    /// Fills it up: writes a file until there is no space left.
    pub fn fill(&self) {
        use std::io::Write;
        let mut file = std::fs::File::create(self.filler()).expect("the filler is created");
        let chunk = vec![0xa5u8; 256 * 1024];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
                Err(e) => panic!("filling the tmpfs: {e}"),
            }
            assert!(written < 1 << 32, "the tmpfs does not fill up");
        }
        let _ = file.sync_all();
    }

    /// Frees what [`fill`](Self::fill) took.
    pub fn free(&self) {
        std::fs::remove_file(self.filler()).expect("the filler is removed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        // The servers' temporary directory could not remove a mount point.
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(parent) = self.dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// Servers behind a cuttable network, with a log of the faults done to them.
pub struct FaultCluster {
    /// The servers (drop order: before the tmpfs below them).
    pub servers: Processes,
    /// Their proxies.
    pub network: Network,
    /// The data directory of `disk_node`, on a tmpfs.
    pub disk: Option<Tmpfs>,
    /// The node whose disk can fill up.
    pub disk_node: Option<usize>,
    /// Extra environment for every server.
    pub env: Vec<(String, String)>,
    /// Nodes running now.
    pub running: Vec<usize>,
    /// When the run started (fault times count from it).
    pub start: Instant,
    /// Every fault so far.
    pub faults: Vec<FaultWindow>,
    /// Kinds of the faults so far, in the order of `faults`.
    pub kinds: Vec<Option<FaultKind>>,
}

impl FaultCluster {
    /// Proxies for `max_nodes` nodes on `block`; no server started yet. A
    /// tmpfs of 64 MiB is mounted for `disk_node`'s data, if given and if
    /// the machine lets the test mount one (else the reason is printed and
    /// `disk` stays empty).
    pub fn new(block: u8, max_nodes: usize, disk_node: Option<usize>) -> FaultCluster {
        let network = Network::start(block, max_nodes);
        let mut servers = Processes::new(block);
        servers.set_seeds(&network.seed());
        let disk = disk_node.and_then(|node| match Tmpfs::mount(&servers.data_dir(node), 64) {
            Ok(tmpfs) => Some(tmpfs),
            Err(why) => {
                eprintln!("no disk-full fault: cannot mount a tmpfs ({why})");
                None
            }
        });
        FaultCluster {
            servers,
            network,
            disk_node: disk.as_ref().and(disk_node),
            disk,
            env: vec![
                // Short coordinator timeouts keep a fault's failures brief.
                ("RINGSTORE_TIMEOUTS__WRITE_MS".into(), "1500".into()),
                ("RINGSTORE_TIMEOUTS__READ_MS".into(), "1500".into()),
            ],
            running: Vec::new(),
            start: Instant::now(),
            faults: Vec::new(),
            kinds: Vec::new(),
        }
    }

    /// Starts (or restarts) server `i` behind its proxy.
    pub fn start_node(&mut self, i: usize) {
        let mut env = self.network.env(i);
        env.extend(self.env.iter().cloned());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.servers.start(i, &env);
        self.running.push(i);
        self.running.sort_unstable();
    }

    /// Time since the run started.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Waits until every running node sees exactly the running nodes, all UN.
    pub fn wait_until_settled(&self, limit: Duration) {
        let count = self.running.len();
        eventually(limit, "every node sees every node UN", || {
            self.running.iter().all(|&host| {
                let rows = self.servers.status_rows(host);
                rows.len() == count && rows.iter().all(|r| r.starts_with("UN "))
            })
        });
    }

    /// Logs a fault that began at `from` and was healed now.
    pub fn log(&mut self, kind: Option<FaultKind>, label: String, node: usize, from: Duration) {
        self.faults.push(FaultWindow {
            label,
            node: NodeId(node),
            from,
            until: Some(self.now()),
        });
        self.kinds.push(kind);
    }

    /// Carries out `fault`: waits its gap, injects it, holds it, heals it,
    /// and waits until the cluster has settled again.
    pub fn inject(&mut self, fault: Fault) {
        std::thread::sleep(fault.gap);
        let node = fault.node;
        let from = self.now();
        // Each fault's duration is the schedule's, not a wait for a state.
        let label = match fault.kind {
            FaultKind::Kill => {
                self.servers.kill(node);
                self.running.retain(|&n| n != node);
                std::thread::sleep(fault.duration);
                self.start_node(node);
                format!("SIGKILL, restart after {:?}", fault.duration)
            }
            FaultKind::Pause => {
                self.servers.signal(node, "STOP");
                std::thread::sleep(fault.duration);
                self.servers.signal(node, "CONT");
                format!("SIGSTOP for {:?}", fault.duration)
            }
            FaultKind::Flap => {
                let cycles = 6;
                for _ in 0..cycles {
                    self.servers.signal(node, "STOP");
                    std::thread::sleep(fault.duration);
                    self.servers.signal(node, "CONT");
                    std::thread::sleep(fault.duration);
                }
                format!("{cycles} SIGSTOP/SIGCONT cycles of {:?}", fault.duration)
            }
            FaultKind::Isolate => {
                self.network.isolate(node);
                std::thread::sleep(fault.duration);
                self.network.heal();
                format!("partitioned from the others for {:?}", fault.duration)
            }
            FaultKind::DropOutgoing | FaultKind::DropIncoming => {
                for other in self.running.clone().into_iter().filter(|&o| o != node) {
                    if fault.kind == FaultKind::DropOutgoing {
                        self.network.cut(node, other);
                    } else {
                        self.network.cut(other, node);
                    }
                }
                std::thread::sleep(fault.duration);
                self.network.heal();
                let way = if fault.kind == FaultKind::DropOutgoing {
                    "to"
                } else {
                    "from"
                };
                format!("packets {way} the others dropped for {:?}", fault.duration)
            }
            FaultKind::DiskFull => {
                let disk = self.disk.as_ref().expect("a disk-full fault has its tmpfs");
                assert_eq!(Some(node), self.disk_node, "the disk-full node");
                disk.fill();
                std::thread::sleep(fault.duration);
                disk.free();
                self.servers.kill(node);
                self.running.retain(|&n| n != node);
                self.start_node(node);
                format!("disk full for {:?}, then restarted", fault.duration)
            }
        };
        self.log(Some(fault.kind), label, node, from);
        self.wait_until_settled(Duration::from_secs(60));
    }

    /// Waits until no running node has a hint pending; else fails, with
    /// what each node holds and the end of its log.
    pub fn wait_until_hints_delivered(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let pending: Vec<String> = self
                .running
                .iter()
                .map(|&i| self.servers.info(i, "Hints pending"))
                .collect();
            if pending.iter().all(|p| p.starts_with("0 ")) {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "hints still pending after {limit:?}: {pending:?}\n{}",
                    self.log_tails(40)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The last `lines` lines of every server's log.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut tails = String::new();
        for i in 0..=self.running.iter().copied().max().unwrap_or(0) {
            let log = self.servers.log(i);
            let all: Vec<&str> = log.lines().collect();
            let tail = all[all.len().saturating_sub(lines)..].join("\n");
            tails.push_str(&format!("--- node{i}'s log, last {lines} lines:\n{tail}\n"));
        }
        tails
    }

    /// Runs `ringstore repair KEYSPACE` through node `host`; its output.
    ///
    /// A repair fails, as Cassandra's does, when a replica is seen down
    /// when it starts or during it; on a machine loaded by the rest of the
    /// suite a healthy node can miss enough probes to be marked down for a
    /// moment (or, just after a partition heals, keep a stale down verdict
    /// for a moment). Then, as an operator would, this waits until the
    /// cluster has settled and runs it again, up to `REPAIR_ATTEMPTS` times.
    /// Any other failure, or the same one every time, fails the test.
    pub fn repair(&self, host: usize, keyspace: &str) -> String {
        const REPAIR_ATTEMPTS: usize = 3;
        let mut failures = Vec::new();
        for _ in 0..REPAIR_ATTEMPTS {
            let repaired = self.servers.cli(host, &["repair", keyspace]);
            let output = format!("{}{}", text(&repaired.stdout), text(&repaired.stderr));
            if repaired.status.success() {
                if !failures.is_empty() {
                    eprintln!(
                        "repair passed after {} flapped attempts: {failures:?}",
                        failures.len()
                    );
                }
                return text(&repaired.stdout);
            }
            let replica_seen_down = output.contains("went down or restarted during the repair")
                || output.contains("is down: every replica must take part");
            assert!(replica_seen_down, "repair failed: {output}");
            failures.push(output);
            self.wait_until_settled(Duration::from_secs(60));
        }
        panic!(
            "repair failed {REPAIR_ATTEMPTS} times, a replica seen down each time: {failures:?}\n{}",
            self.log_tails(40)
        );
    }
}
