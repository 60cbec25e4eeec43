//! The fault-injection suite: real `ringstore server` processes under
//! faults on a seeded schedule — SIGKILL and restart, SIGSTOP (short, long,
//! flapping), a partition, one-way drops, a full disk, a node joining and
//! one decommissioning — while concurrent clients read, put (some values
//! with a TTL of a few seconds), delete and batch at `QUORUM` (RF 3)
//! through random coordinators. After the faults heal
//! (hints delivered, then `ringstore repair`), the history checker
//! (`crates/history`) judges what the clients saw and what every replica
//! holds, and the failures are bounded: one faulty node of RF 3 leaves a
//! quorum, so a failure through a healthy coordinator is allowed only while
//! the failure detector has not yet marked a hanging node down.
//!
//! Each run prints its seed; `RINGSTORE_FAULT_SEED=N` runs the same
//! schedule again (the faults' kinds, nodes and timings; the servers'
//! interleaving is the machine's). `faults_soak` (ignored) runs many seeds
//! for as long as asked: see the book, `docs/src/internals/faults.md`.
//!
//! Address blocks 170 to 172 and 176 (see `tests/processes.rs`); 173 for
//! the soak; 174 and 175 for the disk-full tests at the end.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::nemesis::{FaultCluster, FaultKind, schedule, seed_or};
use common::processes::text;
use common::recorder::{Coordinators, Recorder, RecorderSettings};
use ringstore_history::{
    CheckReport, Checks, ClockBound, FailureKind, FaultWindow, FinalKey, NodeId, Op, check,
};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_simulation::records::{MAX_TTL, failure_of, held, key_name, read_outcome};

/// How long a client waits for an answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);
/// How long the others take to mark a node that stopped answering down
/// (LAN failure detection: a 1 s probe period, suspected for 4 s), plus
/// a second of slack for a loaded machine.
const DETECTION: Duration = Duration::from_secs(6);
/// How long after a fault heals requests may still fail: a node that was
/// paused or cut off works off what queued up meanwhile.
const HEAL_GRACE: Duration = Duration::from_secs(3);
/// How long after a node cut off from the others is back the members it
/// declared down meanwhile may still be seen down by the others, through
/// any coordinator: each subject must learn of the verdict and rejoin (a
/// probe period or two a step; the others announce to down members every
/// 2 s). The simulation's verdict allows the same (`REJOIN` there).
const REJOIN: Duration = Duration::from_secs(8);
/// Keys the clients share: few, so that every key is written and read
/// many times a second, racing.
const KEYS: usize = 40;
/// Keys the clients share in a run that collects garbage: many, so that
/// most keys stay untouched for seconds at a time, long enough for their
/// tombstones to be repaired and purged while the load goes on (a purge
/// needs `gc_grace_seconds`, a repair begun after the propagation delay,
/// and a background pass, with no write to the key meanwhile).
const GC_KEYS: usize = 1000;
/// How far apart the nodes' clocks may be, as measured against the
/// clients' (see `ringstore_history::ClockBound`): every process reads this
/// machine's clock, so only the gap between the monotonic clock the
/// operations are timed on and the wall clock the nodes stamp and expire by
/// counts (NTP slews both alike; a step of the clock would break the run).
const CLOCK_BOUND: Duration = Duration::from_millis(250);
/// The nodes' `max_clock_offset_ms` (the default): how long after its
/// client's deadline a node may still stamp a write.
const MAX_CLOCK_OFFSET: Duration = Duration::from_millis(500);
/// The keyspace's `gc_grace_seconds` in a run that collects garbage.
const GC_GRACE: Duration = Duration::from_secs(2);

/// One run of the suite.
struct Scenario {
    block: u8,
    /// Servers at the start.
    nodes: usize,
    /// The faults, one of each, in an order drawn from the seed.
    kinds: Vec<FaultKind>,
    /// A node joins after the first fault, one leaves after the second.
    topology: bool,
    seed: u64,
    clients: usize,
    /// Collect garbage: a keyspace with `gc_grace_seconds` of [`GC_GRACE`],
    /// `tombstone_gc = repair` (the default) with a propagation delay of
    /// 2 s, a background GC pass every 2 s, a repair after each fault (so
    /// that tombstones and expired values become purgeable while the load
    /// and the faults go on), and `garbagecollect` on every node before the
    /// final reads.
    gc: bool,
}

impl Scenario {
    /// The keys its clients share.
    fn keys(&self) -> usize {
        if self.gc { GC_KEYS } else { KEYS }
    }
}

/// What a run did, for the figures and the assertions.
struct Outcome {
    history: Vec<Op>,
    faults: Vec<FaultWindow>,
    kinds: Vec<Option<FaultKind>>,
    report: CheckReport,
    /// Every key after healing.
    finals: Vec<FinalKey>,
    /// Cells the background passes purged during the run and its healing
    /// (as counted by the nodes running at its end), then during the wait
    /// and repair before `garbagecollect`, and by `garbagecollect` before the
    /// final reads, over every node.
    purged_before: u64,
    purged_while_waiting: u64,
    purged: u64,
}

fn node_name(address: &str) -> usize {
    // 127.B.0.{i + 1}:7100
    let ip = address.split(':').next().unwrap();
    ip.rsplit('.').next().unwrap().parse::<usize>().unwrap() - 1
}

/// The replicas `getendpoints` names for `key`, as node indices.
async fn endpoints(admin: &mut AdminClient<tonic::transport::Channel>, key: &str) -> Vec<usize> {
    let response = admin
        .get_endpoints(pb::GetEndpointsRequest {
            keyspace: "ks".into(),
            key: key.as_bytes().to_vec(),
        })
        .await
        .expect("getendpoints")
        .into_inner();
    response.endpoints.iter().map(|a| node_name(a)).collect()
}

/// Every key after healing: each replica's own cell (tombstones and
/// expired values included), then a read at ALL, timed on the run's clock.
async fn final_state(cluster: &FaultCluster, keyspace_id: &str, keys: usize) -> Vec<FinalKey> {
    let host = cluster.running[0];
    let mut admin = AdminClient::new(cluster.servers.channel(host, 7100));
    let mut client = cluster.servers.client(host);
    let mut finals = Vec::new();
    for key in (0..keys).map(key_name) {
        let read_at = cluster.now();
        let mut replicas = Vec::new();
        for node in endpoints(&mut admin, &key).await {
            let cell = cluster
                .servers
                .internode(node)
                .read(pb::ReadRequest {
                    keyspace_id: keyspace_id.into(),
                    key: key.as_bytes().to_vec(),
                    digest_only: false,
                    ring_checksum: 0,
                })
                .await
                .unwrap_or_else(|s| panic!("reading {key} on node{node}: {s:?}"))
                .into_inner()
                .cell;
            replicas.push((NodeId(node), held(cell)));
        }
        let answer = client
            .get(pb::GetRequest {
                keyspace: "ks".into(),
                key: key.as_bytes().to_vec(),
                consistency: pb::ConsistencyLevel::All as i32,
            })
            .await;
        let answer = answer.map(tonic::Response::into_inner);
        let read_all = read_outcome(answer.map_err(|status| failure_of(&status)));
        finals.push(FinalKey {
            key,
            read_at,
            read_all,
            replicas,
        });
    }
    finals
}

/// Runs `scenario`: servers, load, faults, healing, checks.
fn run(scenario: &Scenario) -> Outcome {
    // The clients' runtime; gRPC channels are made in its context. This
    // thread runs the faults and may block (CLI runs, signals, sleeps).
    let runtime = client_runtime();
    let _runtime = runtime.enter();
    let max_nodes = scenario.nodes + usize::from(scenario.topology);
    let mut faults = schedule(scenario.seed, &scenario.kinds, scenario.nodes);
    let disk_node = faults
        .iter()
        .find(|f| f.kind == FaultKind::DiskFull)
        .map(|f| f.node);
    let mut cluster = FaultCluster::new(scenario.block, max_nodes, disk_node);
    if cluster.disk.is_none() {
        faults.retain(|f| f.kind != FaultKind::DiskFull);
    }
    if scenario.gc {
        cluster.env.extend([
            (
                "RINGSTORE_REPAIR__PROPAGATION_DELAY_SECONDS".into(),
                "2".into(),
            ),
            ("RINGSTORE_REPAIR__GC_INTERVAL_SECONDS".into(), "2".into()),
        ]);
    }
    eprintln!(
        "fault seed {seed} (RINGSTORE_FAULT_SEED={seed} reproduces the schedule): {faults:?}",
        seed = scenario.seed
    );
    for i in 0..scenario.nodes {
        cluster.start_node(i);
    }
    cluster.servers.wait_until_all_un(0, scenario.nodes);
    let grace = GC_GRACE.as_secs().to_string();
    let options: &[&str] = if scenario.gc {
        &["--gc-grace-seconds", &grace]
    } else {
        &[]
    };
    let keyspace_id = cluster
        .servers
        .create_keyspace_with("ks", "SimpleStrategy:3", options);

    let coordinators = Coordinators::default();
    for i in 0..scenario.nodes {
        coordinators.add(i, cluster.servers.client(i));
    }
    cluster.start = Instant::now();
    let settings = RecorderSettings {
        keyspace: "ks".into(),
        clients: scenario.clients,
        keys: scenario.keys(),
        max_ops: 100_000,
        deadline: Instant::now() + Duration::from_secs(150),
        request_timeout: REQUEST_TIMEOUT,
        seed: scenario.seed,
    };
    let recorder = Recorder::start(settings, coordinators.clone(), cluster.start);
    common::processes::eventually(Duration::from_secs(30), "the load warms up", || {
        recorder.completed() >= 100
    });

    for (n, mut fault) in faults.into_iter().enumerate() {
        // After a decommission, faults go to the nodes still there.
        if !cluster.running.contains(&fault.node) {
            fault.node = cluster.running[fault.node % cluster.running.len()];
        }
        cluster.inject(fault);
        if scenario.topology && n == 0 {
            join(&mut cluster, &coordinators, scenario.nodes);
        }
        if scenario.topology && n == 1 {
            decommission(&mut cluster, &coordinators, 1);
        }
        if scenario.gc {
            // What was deleted or expired before the repair may now be
            // purged by the background passes, under the next faults.
            let repaired = cluster.repair(cluster.running[0], "ks");
            eprintln!("repair after fault {n}: {}", repaired.trim());
        }
    }
    // A last stretch of load on the healed cluster.
    std::thread::sleep(Duration::from_millis(500));
    let history = runtime.block_on(recorder.stop());

    eprintln!("healing: waiting for hints, then repairing");
    cluster.wait_until_hints_delivered(Duration::from_secs(60));
    let repaired = cluster.repair(cluster.running[0], "ks");
    eprintln!("{}", repaired.trim());
    let (purged_before, purged_while_waiting, purged) = if scenario.gc {
        collect_garbage(&cluster)
    } else {
        (0, 0, 0)
    };
    let finals = runtime.block_on(final_state(&cluster, &keyspace_id, scenario.keys()));
    let range_movements = cluster
        .faults
        .iter()
        .zip(&cluster.kinds)
        .filter(|(_, kind)| kind.is_none())
        .map(|(window, _)| window.clone())
        .collect();
    let checks = Checks {
        replication_factor: 3,
        monotonic_reads: true,
        range_movements,
        clocks: ClockBound {
            bound: CLOCK_BOUND,
            exempt: Vec::new(),
        },
        stamp_deadline: Some(REQUEST_TIMEOUT + MAX_CLOCK_OFFSET + CLOCK_BOUND),
        // Not judged here: every node reads one clock (the simulation
        // judges write order under clock faults).
        write_order: false,
    };
    let report = check(&history, &finals, &cluster.faults, &checks);
    eprintln!(
        "{} in {:?}; faults: {}",
        report,
        cluster.start.elapsed(),
        cluster
            .faults
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    Outcome {
        history,
        faults: cluster.faults.clone(),
        kinds: cluster.kinds.clone(),
        report,
        finals,
        purged_before,
        purged_while_waiting,
        purged,
    }
}

/// Once the last TTLs have run out and `gc_grace_seconds` and the
/// propagation delay have passed since, repairs (so that every tombstone
/// and expired value may go: tombstone_gc = repair), runs `garbagecollect
/// ks` on every running node, then repairs again (a node may have purged
/// what another kept: the repair must not bring back anything deleted).
/// The cells purged by the background passes during the run and its
/// healing (as the nodes count them since they last started), by them
/// during the wait and the repair that follow, and by `garbagecollect`,
/// over every node.
fn collect_garbage(cluster: &FaultCluster) -> (u64, u64, u64) {
    let counted = || -> u64 {
        cluster
            .running
            .iter()
            .map(|&node| {
                let page = text(&cluster.servers.cli(node, &["metrics"]).stdout);
                page.lines()
                    .filter(|line| line.starts_with("ringstore_gc_purged_total"))
                    .filter_map(|line| line.split_whitespace().last()?.parse::<f64>().ok())
                    .sum::<f64>() as u64
            })
            .sum()
    };
    let background = counted();
    // The last values' TTLs run out, then gc_grace and the propagation
    // delay pass.
    std::thread::sleep(MAX_TTL + GC_GRACE + Duration::from_millis(500));
    let repaired = cluster.repair(cluster.running[0], "ks");
    eprintln!("repair before garbage collection: {}", repaired.trim());
    let waiting = counted().saturating_sub(background);
    let mut purged = 0;
    for &node in &cluster.running {
        let collected = cluster.servers.cli(node, &["garbagecollect", "ks"]);
        let output = text(&collected.stdout);
        assert!(
            collected.status.success(),
            "garbagecollect on node{node}: {output}{}",
            text(&collected.stderr)
        );
        eprintln!("node{node}: {}", output.trim());
        // "ks: scanned N cells, purged M, kept K tombstones and expired cells"
        purged += output
            .split("purged ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("garbagecollect's report on node{node}: {output}"));
    }
    let repaired = cluster.repair(cluster.running[0], "ks");
    eprintln!("repair after garbage collection: {}", repaired.trim());
    (background, waiting, purged)
}

/// Starts node `new` (fresh: it bootstraps) and waits until it is UN.
fn join(cluster: &mut FaultCluster, coordinators: &Coordinators, new: usize) {
    let from = cluster.now();
    cluster.start_node(new);
    cluster.wait_until_settled(Duration::from_secs(90));
    coordinators.add(new, cluster.servers.client(new));
    cluster.log(None, "joined (bootstrap)".into(), new, from);
}

/// Decommissions node `leaving` and waits until it has left.
fn decommission(cluster: &mut FaultCluster, coordinators: &Coordinators, leaving: usize) {
    let from = cluster.now();
    coordinators.remove(leaving);
    let done = cluster.servers.cli(leaving, &["decommission"]);
    assert!(
        done.status.success(),
        "decommission: {}",
        text(&done.stderr)
    );
    let status = cluster.servers.take(leaving).wait().unwrap();
    assert!(
        status.success(),
        "the decommissioned node exits 0: {status}"
    );
    cluster.running.retain(|&n| n != leaving);
    cluster.wait_until_settled(Duration::from_secs(60));
    cluster.log(None, "decommissioned".into(), leaving, from);
}

/// Whether a failed `op` is one the faults excuse, and why.
fn excuse(op: &Op, faults: &[FaultWindow], kinds: &[Option<FaultKind>]) -> Option<&'static str> {
    let failure = op.failure()?;
    let during = |from: Duration, to: Duration| op.invoked <= to && op.completed >= from;
    for (fault, kind) in faults.iter().zip(kinds) {
        let until = fault.until.expect("every fault healed");
        if op.coordinator == fault.node && during(fault.from, until + HEAL_GRACE) {
            return Some("through the faulty node");
        }
        let hanging = kind.is_some_and(FaultKind::makes_unresponsive);
        let slow = matches!(
            failure.kind,
            FailureKind::Timeout | FailureKind::ClientTimeout
        );
        if hanging && slow && during(fault.from, fault.from + DETECTION + REQUEST_TIMEOUT) {
            return Some("a timeout before the hanging node was marked down");
        }
        if slow && during(until, until + HEAL_GRACE) {
            return Some("a timeout while the healed node caught up");
        }
        let unavailable = failure.kind == FailureKind::Unavailable;
        if kind.is_some_and(FaultKind::isolates) && unavailable && during(until, until + REJOIN) {
            return Some("the isolated node's stale down verdicts, until their subjects rejoined");
        }
    }
    None
}

/// The assertions every run makes: the checker passed, the load
/// overlapped every fault, and every failure is excused by one.
fn assert_sound(outcome: &Outcome) {
    let Outcome {
        history,
        faults,
        kinds,
        report,
        ..
    } = outcome;
    assert!(
        report.is_ok(),
        "the history checker failed: {report}\nfaults: {faults:#?}"
    );
    assert!(report.writes_acked >= 500, "too little load: {report}");
    for fault in faults {
        let until = fault.until.unwrap();
        let ok_within = |write: bool| {
            history
                .iter()
                .filter(|op| {
                    fault.from <= op.completed
                        && op.completed <= until
                        && op.is_write() == write
                        && op.succeeded()
                })
                .count()
        };
        let (writes, reads) = (ok_within(true), ok_within(false));
        let mut per_coordinator: BTreeMap<(usize, &str), (usize, Duration)> = BTreeMap::new();
        for op in history
            .iter()
            .filter(|op| fault.from <= op.invoked && op.completed <= until)
        {
            let what = if op.is_write() { "write" } else { "read" };
            let entry = per_coordinator.entry((op.coordinator.0, what)).or_default();
            entry.0 += 1;
            entry.1 += op.completed - op.invoked;
        }
        let latencies: Vec<String> = per_coordinator
            .iter()
            .map(|((node, what), (n, total))| {
                format!("node{node} {what}s {n} (mean {:?})", *total / *n as u32)
            })
            .collect();
        eprintln!(
            "during {fault}: {writes} writes acknowledged, {reads} reads answered; {}",
            latencies.join(", ")
        );
        assert!(
            writes >= 3 && reads >= 3,
            "the load did not overlap {fault}: {writes} writes, {reads} reads"
        );
    }
    let mut excused: BTreeMap<&str, usize> = BTreeMap::new();
    let mut unexcused = Vec::new();
    for op in history.iter().filter(|op| op.failure().is_some()) {
        match excuse(op, faults, kinds) {
            Some(why) => *excused.entry(why).or_default() += 1,
            None => unexcused.push(op),
        }
    }
    eprintln!("failed operations excused by a fault: {excused:?}");
    assert!(
        unexcused.is_empty(),
        "{} operations failed that no fault excuses (one faulty node of RF 3 leaves a quorum):\n{}\nfaults: {}",
        unexcused.len(),
        unexcused
            .iter()
            .take(30)
            .map(|op| format!("  {op:?}"))
            .collect::<Vec<_>>()
            .join("\n"),
        faults
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
}

#[test]
fn kills_pauses_and_a_full_disk_lose_no_acknowledged_write() {
    let outcome = run(&Scenario {
        block: 170,
        nodes: 4,
        kinds: vec![
            FaultKind::Kill,
            FaultKind::Pause,
            FaultKind::Flap,
            FaultKind::DiskFull,
        ],
        topology: false,
        seed: seed_or(1701),
        clients: 6,
        gc: false,
    });
    assert_sound(&outcome);
}

#[test]
fn partitions_and_one_way_drops_lose_no_acknowledged_write() {
    let outcome = run(&Scenario {
        block: 171,
        nodes: 4,
        kinds: vec![
            FaultKind::Isolate,
            FaultKind::DropOutgoing,
            FaultKind::DropIncoming,
        ],
        topology: false,
        seed: seed_or(1711),
        clients: 6,
        gc: false,
    });
    assert_sound(&outcome);
}

#[test]
fn a_join_and_a_decommission_amid_faults_lose_no_acknowledged_write() {
    let outcome = run(&Scenario {
        block: 172,
        nodes: 4,
        kinds: vec![FaultKind::Pause, FaultKind::Kill, FaultKind::Isolate],
        topology: true,
        seed: seed_or(1721),
        clients: 6,
        gc: false,
    });
    assert_sound(&outcome);
}

/// Deletes and TTL writes (and batches of them) under `kill -9` and
/// partitions, with a repair after each fault and a short `gc_grace` so
/// that garbage collection purges tombstones and expired values while the
/// load and the faults go on; after the healing, `garbagecollect` on every
/// node and a repair: no read, and no final read at `ALL` or of any
/// replica, shows a deleted or expired value (the checker's
/// `Resurrected`, `Expired`, `Lost` and `Divergent` rules), and the
/// garbage was collected.
#[test]
fn deletes_and_ttl_writes_never_come_back_through_kills_partitions_gc_and_repair() {
    let outcome = run(&Scenario {
        block: 176,
        nodes: 4,
        kinds: vec![FaultKind::Kill, FaultKind::Isolate, FaultKind::Kill],
        topology: false,
        seed: seed_or(1761),
        clients: 6,
        gc: true,
    });
    assert_sound(&outcome);
    let report = &outcome.report;
    let purged_everywhere = outcome
        .finals
        .iter()
        .filter(|last| last.replicas.iter().all(|(_, cell)| cell.is_none()))
        .count();
    eprintln!(
        "{} deletes and {} TTL writes acknowledged, {} reads found nothing; the background \
         passes purged {} cells during the run and its healing and {} while the last \
         tombstones aged, garbagecollect {} after; \
         {purged_everywhere} of {GC_KEYS} keys held by no replica at the end",
        report.deletes_acked,
        report.ttl_writes_acked,
        report.reads_not_found,
        outcome.purged_before,
        outcome.purged_while_waiting,
        outcome.purged
    );
    assert!(
        report.deletes_acked >= 50 && report.ttl_writes_acked >= 50 && report.reads_not_found >= 50,
        "too few deletes, TTL writes or empty reads to judge: {report}"
    );
    // After the run, the background passes (every 2 s) race `garbagecollect`
    // for what the last repair made purgeable: either may take it (a CI run
    // saw `garbagecollect` purge 0, everything gone before it ran).
    assert!(
        outcome.purged_before > 0 && outcome.purged_while_waiting + outcome.purged > 0,
        "garbage collection purged nothing during the run or after it: the test did not test it"
    );
}

/// The soak: `RINGSTORE_SOAK_SECONDS` (default 600) of runs of every
/// fault kind, one seed after another from `RINGSTORE_SOAK_FIRST_SEED`
/// (default 1), every third run with a join and a decommission.
#[test]
#[ignore = "a soak: minutes to hours; see docs/src/internals/faults.md"]
fn faults_soak() {
    let seconds: u64 = std::env::var("RINGSTORE_SOAK_SECONDS")
        .map_or(600, |s| s.parse().expect("RINGSTORE_SOAK_SECONDS"));
    let first: u64 = std::env::var("RINGSTORE_SOAK_FIRST_SEED")
        .map_or(1, |s| s.parse().expect("RINGSTORE_SOAK_FIRST_SEED"));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut seed = first;
    while Instant::now() < deadline {
        let topology = seed.is_multiple_of(3);
        eprintln!("== soak seed {seed} (topology change: {topology})");
        let outcome = run(&Scenario {
            block: 173,
            nodes: if topology { 4 } else { 5 },
            kinds: vec![
                FaultKind::Kill,
                FaultKind::Pause,
                FaultKind::Flap,
                FaultKind::Isolate,
                FaultKind::DropOutgoing,
                FaultKind::DropIncoming,
                FaultKind::DiskFull,
            ],
            topology,
            seed,
            clients: 12,
            gc: seed.is_multiple_of(2),
        });
        assert_sound(&outcome);
        seed += 1;
    }
    eprintln!("soak: seeds {first} to {} passed", seed - 1);
}

/// The runtime the tests' clients run on.
fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Returns from a test that needs a tmpfs when it may not mount one (not
/// root); as root the mount must work, so its failure fails the test.
fn skip_without_root() {
    let uid = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout);
    assert!(
        uid.is_ok_and(|uid| uid != b"0\n"),
        "running as root, yet the tmpfs for node2's data could not be mounted"
    );
    eprintln!("skipped: mounting a tmpfs for node2's data needs root");
}

/// A node whose disk fills up stops for good: sled keeps the first I/O
/// error it meets (here `ENOSPC`) and fails every later write, even once
/// space is freed (the suite found a node in that state failing every write
/// while gossip showed it `UN`). Under `disk_failure_policy = stop` the node
/// refuses writes naming the failure and leaves gossip, so the others mark
/// it down and hint its writes: `QUORUM` writes through the healthy nodes
/// never fail. Restarted once its disk has room, it gets every write it
/// missed from the hints, each key with its own value. Block 174.
#[test]
fn a_node_whose_disk_fills_up_stops_and_after_a_restart_gets_every_write_it_missed() {
    let runtime = client_runtime();
    let _runtime = runtime.enter();
    let mut cluster = FaultCluster::new(174, 3, Some(2));
    let Some(disk) = cluster.disk.take() else {
        return skip_without_root();
    };
    for i in 0..3 {
        cluster.start_node(i);
    }
    cluster.servers.wait_until_all_un(0, 3);
    let keyspace_id = cluster.servers.create_keyspace("ks", "SimpleStrategy:3");
    let value_of = |key: &str| format!("{key}-value").into_bytes();
    let put = |cluster: &FaultCluster, coordinator: usize, key: &str| {
        let request = pb::PutRequest {
            keyspace: "ks".into(),
            key: key.as_bytes().to_vec(),
            value: value_of(key),
            consistency: pb::ConsistencyLevel::Quorum as i32,
            timestamp_micros: None,
            ttl_seconds: None,
        };
        let mut client = cluster.servers.client(coordinator);
        runtime.block_on(client.put(request)).map(drop)
    };
    let held_by_node2 = |cluster: &FaultCluster, key: &str| {
        let request = pb::ReadRequest {
            keyspace_id: keyspace_id.clone(),
            key: key.as_bytes().to_vec(),
            digest_only: false,
            ring_checksum: 0,
        };
        let answer = runtime.block_on(cluster.servers.internode(2).read(request));
        answer
            .ok()
            .and_then(|a| a.into_inner().cell)
            .and_then(|c| c.value)
    };
    let node2_seen_down = |cluster: &FaultCluster, host: usize| {
        let rows = cluster.servers.status_rows(host);
        rows.len() == 3 && rows.iter().filter(|r| r.starts_with("DN ")).count() == 1
    };

    disk.fill();
    // QUORUM writes through the healthy nodes, until both see node2 down
    // (and at least a few after): none may fail.
    let mut written = Vec::new();
    let mut failed = Vec::new();
    let mut down_since = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while down_since.is_none_or(|n| written.len() < n + 20) {
        assert!(
            Instant::now() < deadline,
            "node2 was not seen down within 60 s of its disk filling up ({} writes)\n{}",
            written.len(),
            cluster.log_tails(20)
        );
        let key = format!("while-full-{}", written.len());
        if let Err(status) = put(&cluster, written.len() % 2, &key) {
            failed.push((key.clone(), status));
        }
        written.push(key);
        if down_since.is_none()
            && written.len() % 10 == 0
            && node2_seen_down(&cluster, 0)
            && node2_seen_down(&cluster, 1)
        {
            down_since = Some(written.len());
        }
    }
    eprintln!(
        "{} QUORUM writes while node2's disk was full, {} of them before both others saw it down",
        written.len(),
        down_since.unwrap_or_default()
    );
    assert!(
        failed.is_empty(),
        "QUORUM writes failed with one replica's disk full: {failed:?}"
    );
    let storage = cluster.servers.info(2, "Storage");
    assert!(
        storage.starts_with("FAILED: "),
        "node2's info shows the failure: {storage}"
    );
    let refused = put(&cluster, 2, "through-node2")
        .expect_err("node2 refuses writes once its storage failed");
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("storage failed") && refused.message().contains("restart"),
        "the refusal names the failure and the way out: {}",
        refused.message()
    );
    assert!(
        cluster
            .servers
            .log(2)
            .contains("disk_failure_policy = stop"),
        "node2 logs what it did"
    );

    disk.free();
    cluster.servers.kill(2);
    cluster.running.retain(|&n| n != 2);
    cluster.start_node(2);
    cluster.wait_until_settled(Duration::from_secs(60));
    cluster.wait_until_hints_delivered(Duration::from_secs(60));
    let missing: Vec<&String> = written
        .iter()
        .filter(|key| held_by_node2(&cluster, key) != Some(value_of(key)))
        .collect();
    assert!(
        missing.is_empty(),
        "node2 lacks {} of the {} writes made while its disk was full: {missing:?}",
        missing.len(),
        written.len()
    );
    put(&cluster, 2, "after-restart").expect("node2 takes writes again after its restart");
    assert_eq!(
        held_by_node2(&cluster, "after-restart"),
        Some(value_of("after-restart"))
    );
    drop(cluster);
    drop(disk);
}

/// A stale replica that answers reads but cannot take writes (its disk is
/// full and `disk_failure_policy = ignore` keeps it `UN`) must not fail a
/// `QUORUM` read: the read's blocking repair writes the newest value to the
/// replica the read did not contact instead, so a quorum holds it before the
/// client sees it (the suite found such reads failing). Node2 coordinates,
/// so its own stale copy is the read's data. Block 175.
#[test]
fn a_quorum_read_whose_stale_replica_cannot_take_the_repair_writes_it_elsewhere() {
    let runtime = client_runtime();
    let _runtime = runtime.enter();
    let mut cluster = FaultCluster::new(175, 3, Some(2));
    let Some(disk) = cluster.disk.take() else {
        return skip_without_root();
    };
    cluster.start_node(0);
    cluster.start_node(1);
    cluster.env.push((
        "RINGSTORE_STORAGE__DISK_FAILURE_POLICY".into(),
        "ignore".into(),
    ));
    cluster.start_node(2);
    cluster.servers.wait_until_all_un(0, 3);
    cluster.servers.create_keyspace("ks", "SimpleStrategy:3");
    let put = |cluster: &FaultCluster, key: &str, value: &str, level: pb::ConsistencyLevel| {
        let request = pb::PutRequest {
            keyspace: "ks".into(),
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            consistency: level as i32,
            timestamp_micros: None,
            ttl_seconds: None,
        };
        let mut client = cluster.servers.client(0);
        runtime
            .block_on(client.put(request))
            .expect("the put succeeds");
    };
    let keys: Vec<String> = (0..20).map(|i| format!("key-{i}")).collect();
    for key in &keys {
        put(
            &cluster,
            key,
            &format!("{key}-old"),
            pb::ConsistencyLevel::All,
        );
    }
    disk.fill();
    // Filler writes until node2's storage has failed (sled may first fill
    // space it had reserved), so that it misses every new value below.
    let filler = "f".repeat(32 * 1024);
    let mut fillers = 0;
    common::processes::eventually(
        Duration::from_secs(30),
        "node2's storage fails once its disk is full",
        || {
            fillers += 1;
            put(
                &cluster,
                &format!("filler-{fillers}"),
                &filler,
                pb::ConsistencyLevel::Quorum,
            );
            cluster.servers.info(2, "Storage").starts_with("FAILED: ")
        },
    );
    for key in &keys {
        put(
            &cluster,
            key,
            &format!("{key}-new"),
            pb::ConsistencyLevel::Quorum,
        );
    }
    let mut node2 = cluster.servers.client(2);
    for key in &keys {
        let request = pb::GetRequest {
            keyspace: "ks".into(),
            key: key.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
        };
        let answer = runtime
            .block_on(node2.get(request))
            .unwrap_or_else(|status| panic!("QUORUM read of {key} through node2: {status:?}"))
            .into_inner();
        assert_eq!(answer.value, format!("{key}-new").into_bytes(), "{key}");
    }
    drop(cluster);
    drop(disk);
}
