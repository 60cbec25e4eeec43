//! Lightweight transactions under faults on real `ringstore server`
//! processes: a counter built only from compare-and-sets (read it with
//! `GetSerial`, then `PutIf` the incremented value expecting what was
//! read; retry on "not applied"), 8 clients through every node, while
//! nodes are killed with SIGKILL and restarted, paused, flapped and cut
//! off. Nothing may be lost or counted twice: the final value equals the
//! acknowledged increments plus at most those whose outcome was unknown.
//!
//! A failure marked "certainly not applied" (`x-ringstore-cas:
//! not-applied`) counts as nothing; any other failure of a `PutIf`
//! (timeouts, a coordinator killed mid-call) is unknown. A client avoids a
//! coordinator that failed it for a second, as the other fault tests'
//! clients do, so the load keeps going through the healthy nodes, and the
//! test asserts that increments were acknowledged during every fault.
//!
//! A second run adds a node (bootstrap) after the first fault and
//! decommissions another after the second, so the counter's replicas move
//! while compare-and-sets run: pending replicas vote, and the replaced
//! ring's replicas keep voting for `ring_delay` after the switch.
//!
//! Address blocks 178 and 179. `RINGSTORE_FAULT_SEED=N` replays a
//! schedule.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::nemesis::{FaultCluster, FaultKind, schedule, seed_or};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tonic::transport::Channel;

const NODES: usize = 3;
const CLIENTS: usize = 8;
/// How long a client waits for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);
/// How long a client avoids a coordinator that failed it.
const SHUN: Duration = Duration::from_secs(1);

/// The nodes clients send to now (a decommissioned one leaves the list).
type Active = Arc<Mutex<Vec<usize>>>;

/// What one client saw.
#[derive(Default)]
struct Tally {
    acked: u64,
    unknown: u64,
    /// When each acknowledged increment completed, since the start.
    acked_at: Vec<Duration>,
    failures: u64,
    /// Each failed call: when it ended, and its status.
    failed_at: Vec<(Duration, String)>,
    /// Each compare-and-set sent: when, and when it was answered or failed.
    attempts: Vec<(Duration, Duration)>,
}

fn expected(current: &Option<Vec<u8>>) -> Option<pb::Expected> {
    use pb::expected::Condition;
    Some(pb::Expected {
        condition: Some(match current {
            Some(value) => Condition::Value(value.clone()),
            None => Condition::Absent(pb::ExpectAbsent {}),
        }),
    })
}

fn not_applied(status: &tonic::Status) -> bool {
    status
        .metadata()
        .get("x-ringstore-cas")
        .is_some_and(|v| v == "not-applied")
}

/// One client: read, then compare-and-set the increment, through the
/// coordinators in turn (skipping those it shuns), until told to stop.
async fn count(
    id: usize,
    coordinators: Vec<ClientClient<Channel>>,
    active: Active,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut tally = Tally::default();
    let mut shunned: HashMap<usize, Instant> = HashMap::new();
    let mut turn = id;
    let deadline = Instant::now() + Duration::from_secs(150);
    for _ in 0..5_000 {
        if stop.load(Ordering::SeqCst) || Instant::now() >= deadline {
            break;
        }
        turn += 1;
        let nodes = active.lock().unwrap().clone();
        let node = (0..nodes.len())
            .map(|i| nodes[(turn + i) % nodes.len()])
            .find(|n| shunned.get(n).is_none_or(|until| *until <= Instant::now()))
            .unwrap_or(nodes[turn % nodes.len()]);
        let mut client = coordinators[node].clone();
        let mut read = tonic::Request::new(pb::GetSerialRequest {
            keyspace: "ks".into(),
            key: b"counter".to_vec(),
            ..Default::default()
        });
        read.set_timeout(REQUEST_TIMEOUT);
        let current = match client.get_serial(read).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                answer.found.then_some(answer.value)
            }
            Err(status) => {
                tally.failures += 1;
                tally
                    .failed_at
                    .push((start.elapsed(), format!("node{node} read: {status}")));
                shunned.insert(node, Instant::now() + SHUN);
                continue;
            }
        };
        let n: u64 = current.as_deref().map_or(0, |v| {
            std::str::from_utf8(v)
                .expect("a number")
                .parse()
                .expect("a number")
        });
        let mut cas = tonic::Request::new(pb::PutIfRequest {
            keyspace: "ks".into(),
            key: b"counter".to_vec(),
            expected: expected(&current),
            value: (n + 1).to_string().into_bytes(),
            ..Default::default()
        });
        cas.set_timeout(REQUEST_TIMEOUT);
        let sent = start.elapsed();
        let answer = client.put_if(cas).await;
        tally.attempts.push((sent, start.elapsed()));
        match answer {
            Ok(answer) if answer.get_ref().applied => {
                tally.acked += 1;
                tally.acked_at.push(start.elapsed());
            }
            Ok(_) => {}
            Err(status) => {
                tally.failures += 1;
                tally
                    .failed_at
                    .push((start.elapsed(), format!("node{node} cas: {status}")));
                shunned.insert(node, Instant::now() + SHUN);
                if !not_applied(&status) {
                    tally.unknown += 1;
                }
            }
        }
    }
    tally
}

/// One run: `NODES` servers on `block` (room for one more when
/// `topology`), the counter's clients, the faults of `kinds` on the
/// schedule of `seed`; with `topology`, a node joins after the first fault
/// and node 1 is decommissioned after the second. Checks the count and
/// that the load went on through every event.
fn run(block: u8, seed: u64, kinds: &[FaultKind], topology: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _runtime = runtime.enter();
    let faults = schedule(seed, kinds, NODES);
    eprintln!("fault seed {seed} (RINGSTORE_FAULT_SEED={seed} reproduces it): {faults:?}");
    let slots = NODES + usize::from(topology);
    let mut cluster = FaultCluster::new(block, slots, None);
    for i in 0..NODES {
        cluster.start_node(i);
    }
    cluster.servers.wait_until_all_un(0, NODES);
    cluster
        .servers
        .create_keyspace_with("ks", "SimpleStrategy:3", &[]);
    let coordinators: Vec<_> = (0..slots).map(|i| cluster.servers.client(i)).collect();
    let active: Active = Arc::new(Mutex::new((0..NODES).collect()));
    cluster.start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let tallies: Vec<_> = (0..CLIENTS)
        .map(|id| {
            runtime.spawn(count(
                id,
                coordinators.clone(),
                active.clone(),
                cluster.start,
                stop.clone(),
            ))
        })
        .collect();
    // Warm up before the first fault.
    std::thread::sleep(Duration::from_secs(2));
    for (n, fault) in faults.into_iter().enumerate() {
        cluster.inject(fault);
        if topology && n == 0 {
            let from = cluster.now();
            cluster.start_node(NODES);
            cluster.wait_until_settled(Duration::from_secs(90));
            active.lock().unwrap().push(NODES);
            cluster.log(None, "joined (bootstrap)".into(), NODES, from);
        }
        if topology && n == 1 {
            let from = cluster.now();
            active.lock().unwrap().retain(|&node| node != 1);
            let done = cluster.servers.cli(1, &["decommission"]);
            assert!(done.status.success(), "decommission failed");
            let status = cluster.servers.take(1).wait().unwrap();
            assert!(
                status.success(),
                "the decommissioned node exits 0: {status}"
            );
            cluster.running.retain(|&node| node != 1);
            cluster.wait_until_settled(Duration::from_secs(60));
            cluster.log(None, "decommissioned".into(), 1, from);
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::SeqCst);
    let tallies: Vec<Tally> = runtime.block_on(async {
        let mut all = Vec::new();
        for tally in tallies {
            all.push(tally.await.expect("a client panicked"));
        }
        all
    });

    let acked: u64 = tallies.iter().map(|t| t.acked).sum();
    let unknown: u64 = tallies.iter().map(|t| t.unknown).sum();
    let failures: u64 = tallies.iter().map(|t| t.failures).sum();
    let reader = active.lock().unwrap()[0];
    let total = runtime.block_on(async {
        let mut client = cluster.servers.client(reader);
        let read = client
            .get_serial(pb::GetSerialRequest {
                keyspace: "ks".into(),
                key: b"counter".to_vec(),
                ..Default::default()
            })
            .await
            .expect("a serial read on the healed cluster");
        let read = read.into_inner();
        assert!(read.found, "the counter was written");
        String::from_utf8(read.value)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    eprintln!(
        "counter {total}: {acked} increments acknowledged, {unknown} unknown, {failures} failed \
         calls in all; faults: {}",
        cluster
            .faults
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    );
    assert!(
        (acked..=acked + unknown).contains(&total),
        "the counter is {total}: {acked} increments acknowledged, {unknown} unknown"
    );
    // The load overlapped every fault and movement: compare-and-sets were
    // in flight during each, and increments were acknowledged during each
    // that lasted 2 s or more (one node of three faulty leaves a quorum; a
    // movement's ring switch may hold requests for a moment).
    let acked_at: Vec<Duration> = tallies.iter().flat_map(|t| t.acked_at.clone()).collect();
    for window in &cluster.faults {
        let until = window.until.expect("healed");
        let overlapping = tallies
            .iter()
            .flat_map(|t| &t.attempts)
            .filter(|(sent, ended)| *sent <= until && *ended >= window.from)
            .count();
        assert!(
            overlapping > 0,
            "no compare-and-set in flight during {window}"
        );
        let during = acked_at
            .iter()
            .filter(|&&at| (window.from..until).contains(&at))
            .count();
        if during == 0 && until - window.from >= Duration::from_secs(2) {
            let failed: Vec<String> = tallies
                .iter()
                .flat_map(|t| &t.failed_at)
                .filter(|(at, _)| (window.from..until).contains(at))
                .map(|(at, what)| format!("{at:?} {what}"))
                .collect();
            panic!(
                "no increment acknowledged during {window}; failed calls then: {}",
                failed.join("; ")
            );
        }
    }
    // Progress: while the faults lasted, increments were acknowledged at
    // a fifth or more of the rate this machine gave the same load before
    // the first fault. Seen on 2 cores: 0.35 to 1.1 of it. A fixed floor
    // (100 increments) failed the first run on a fresh machine, right after
    // its 18-minute build, with the count exact and 64 increments, where
    // its rerun made 221: the machine, not the store, was slow. Rounds that
    // wait for every replica instead of a quorum gave 0.17 to 0.32 (the
    // check per fault above fails them first); a deeper collapse fails
    // here whatever the machine.
    let first = cluster.faults.first().expect("faults were injected").from;
    let last = cluster
        .faults
        .iter()
        .filter_map(|window| window.until)
        .max()
        .expect("healed");
    let before = acked_at.iter().filter(|&&at| at < first).count();
    let amid = acked_at
        .iter()
        .filter(|&&at| (first..last).contains(&at))
        .count();
    let rate_before = before as f64 / first.as_secs_f64();
    let rate_amid = amid as f64 / (last - first).as_secs_f64();
    eprintln!(
        "{before} increments in the {first:?} before the faults ({rate_before:.1}/s), \
         {amid} in the {:?} of faults ({rate_amid:.1}/s)",
        last - first
    );
    assert!(
        before > 0 && rate_amid * 5.0 >= rate_before,
        "too little progress: {rate_amid:.1} increments/s amid the faults against \
         {rate_before:.1}/s before them"
    );
    // Unknown outcomes come mostly from coordinators pre-empting each
    // other (the clients do not route a key to one node here, on purpose)
    // and from calls cut by the faults: their number follows the faults'
    // length more than the load, which a busy machine halves. Seen: 98
    // against 671; 55–75 against 281–318 alone; 52 against 151 in a full
    // suite run on 2 cores. Half the acknowledged count still catches a
    // collapse into unknowns.
    assert!(
        unknown * 2 <= acked,
        "{unknown} unknown outcomes against {acked} acknowledged increments"
    );
}

#[test]
fn a_counter_of_compare_and_sets_through_kills_pauses_and_partitions_counts_exactly() {
    let kinds = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::Flap,
        FaultKind::Isolate,
    ];
    run(178, seed_or(1781), &kinds, false);
}

#[test]
fn a_counter_of_compare_and_sets_through_a_join_and_a_decommission_amid_kills_counts_exactly() {
    run(
        179,
        seed_or(1791),
        &[FaultKind::Kill, FaultKind::Pause],
        true,
    );
}
