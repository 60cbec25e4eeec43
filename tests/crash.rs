//! Never lose an acknowledged write, with real processes killed by SIGKILL:
//! a whole cluster killed at once in `batch` durability, and a node killed
//! under writes then removed with `removenode`, while a survivor that was
//! paused holds older versions than the others. Address blocks 60 and 61
//! (see `tests/processes.rs`).
//!
//! Both run the concurrent QUORUM load of `common::load` through gRPC and
//! the operator's steps through the CLI.

mod common;

use std::time::{Duration, Instant};

use common::load::{Coordinators, Load, LoadReport, LoadSettings, check_read, version_of};
use common::processes::{Processes, eventually, text};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::admin_client::AdminClient;

/// Node `i`'s name among the coordinators.
fn node(i: usize) -> String {
    format!("node{i}")
}

/// A load of four clients on `coordinators`, each writing 50 keys of its own.
fn start_load(coordinators: &Coordinators) -> Load {
    let settings = LoadSettings {
        keyspace: "ks".into(),
        clients: 4,
        keys_per_client: 50,
        max_ops: 20_000,
        deadline: Instant::now() + Duration::from_secs(40),
    };
    Load::start(settings, coordinators.clone())
}

/// Waits (polling) until the load has `count` writes acknowledged.
async fn wait_for_writes(load: &Load, count: u64) {
    common::eventually(
        Duration::from_secs(30),
        "the load has its writes acknowledged",
        || async { load.writes_ok() >= count },
    )
    .await;
}

/// Reads every acknowledged key at QUORUM, round robin through `nodes`:
/// the stale or missing answers, and how many keys held a version later
/// than the one acknowledged (a write in flight that landed).
async fn read_back(
    servers: &Processes,
    nodes: &[usize],
    report: &LoadReport,
) -> (Vec<String>, usize) {
    let mut lost = Vec::new();
    let mut later = 0;
    for (n, (key, &version)) in report.acked.iter().enumerate() {
        let mut client = servers.client(nodes[n % nodes.len()]);
        let request = pb::GetRequest {
            keyspace: "ks".into(),
            key: key.as_bytes().to_vec(),
            consistency: pb::ConsistencyLevel::Quorum as i32,
        };
        match client.get(request).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                match check_read(key, Some(version), answer.found, &answer.value) {
                    Ok(()) => later += usize::from(version_of(key, &answer.value) > Some(version)),
                    Err(stale) => lost.push(stale),
                }
            }
            Err(status) => lost.push(format!("{key}: read failed: {status:?}")),
        }
    }
    (lost, later)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_write_survives_sigkill_of_every_node_in_batch_mode() {
    let began = Instant::now();
    let mut servers = Processes::new(60);
    for i in 0..3 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 3);
    assert_eq!(servers.info(0, "Durability"), "batch", "the default mode");
    servers.create_keyspace("ks", "SimpleStrategy:3");

    let coordinators = Coordinators::default();
    for i in 0..3 {
        coordinators.add(&node(i), servers.client(i));
    }
    let load = start_load(&coordinators);
    wait_for_writes(&load, 3000).await;
    let killed_at = Instant::now();
    servers.kill_all();
    let report = load.stop().await;
    eprintln!("load: {}", report.summary());

    // The load overlapped the kill and was healthy until it.
    let (writes_just_before, _) =
        report.completed_between(killed_at - Duration::from_millis(500), killed_at);
    assert!(
        writes_just_before >= 10,
        "only {writes_just_before} writes acknowledged in the 500 ms before the kill"
    );
    assert!(report.writes_ok >= 3000, "{}", report.summary());
    let before = report.failures_between(began, killed_at);
    assert!(before.is_empty(), "failures before the kill: {before:#?}");
    assert!(report.stale_reads.is_empty(), "{:#?}", report.stale_reads);

    // The same three processes on their data: every acknowledged write is
    // there, at its version or a later one of its writer.
    for i in 0..3 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 3);
    let (lost, later) = read_back(&servers, &[0, 1, 2], &report).await;
    eprintln!(
        "after the restart: {} keys checked, {} lost, {later} at a later version; {:?} in all",
        report.acked.len(),
        lost.len(),
        began.elapsed()
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:#?}");
}

/// The replicas `getendpoints` names for `key`, as node indices.
async fn endpoints(admin: &mut AdminClient<tonic::transport::Channel>, key: &str) -> Vec<usize> {
    let response = admin
        .get_endpoints(pb::GetEndpointsRequest {
            keyspace: "ks".into(),
            key: key.as_bytes().to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    response
        .endpoints
        .iter()
        .map(|address| {
            // 127.61.0.{i + 1}:7100
            let ip = address.split(':').next().unwrap();
            ip.rsplit('.').next().unwrap().parse::<usize>().unwrap() - 1
        })
        .collect()
}

/// Checks each acknowledged key on each replica `getendpoints` names (its
/// own copy, no coordination): the copies older than acknowledged, as
/// (key, description).
async fn copies_behind(
    servers: &Processes,
    keyspace_id: &str,
    report: &LoadReport,
) -> Vec<(String, String)> {
    let mut admin = AdminClient::new(servers.channel(0, 7100));
    let mut behind = Vec::new();
    for (key, &version) in &report.acked {
        let replicas = endpoints(&mut admin, key).await;
        assert_eq!(replicas.len(), 3, "{key}: {replicas:?}");
        for replica in replicas {
            let cell = servers
                .internode(replica)
                .read(pb::ReadRequest {
                    keyspace_id: keyspace_id.into(),
                    key: key.as_bytes().to_vec(),
                    digest_only: false,
                    ring_checksum: 0,
                })
                .await
                .unwrap()
                .into_inner()
                .cell;
            let held = cell.and_then(|c| c.value).and_then(|v| version_of(key, &v));
            if held.is_none_or(|held| held < version) {
                let description =
                    format!("{key} on node{replica}: {held:?}, acknowledged v{version}");
                behind.push((key.clone(), description));
            }
        }
    }
    behind
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removenode_after_a_sigkill_under_writes_keeps_every_acknowledged_write() {
    let began = Instant::now();
    let mut servers = Processes::new(61);
    // No hints: the survivors hold only what they acknowledged themselves.
    let no_hints = [("RINGSTORE_HINTS__ENABLED", "false")];
    for i in 0..5 {
        servers.start(i, &no_hints);
    }
    servers.wait_until_all_un(0, 5);
    let keyspace_id = servers.create_keyspace("ks", "SimpleStrategy:3");
    let victim = 4;
    let victim_id = servers.info(victim, "ID");

    let coordinators = Coordinators::default();
    for i in 0..5 {
        coordinators.add(&node(i), servers.client(i));
    }
    let load = start_load(&coordinators);
    wait_for_writes(&load, 800).await;
    // A survivor misses writes: paused (SIGSTOP) for a while, with no hints
    // to bring them later, it holds older versions than the others.
    let lagging = 3;
    coordinators.remove(&node(lagging));
    let acked_before_pause = load.writes_ok();
    servers.signal(lagging, "STOP");
    let paused_at = Instant::now();
    // A fault's duration, not a wait for a state: shorter than failure
    // detection, so the others keep it up and it simply misses writes.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    servers.signal(lagging, "CONT");
    let resumed_at = Instant::now();
    let missed = load.writes_ok() - acked_before_pause;
    eprintln!(
        "node{lagging} paused {:?} while {missed} writes were acknowledged",
        resumed_at - paused_at
    );
    assert!(
        missed > 0,
        "no write went on while node{lagging} was paused"
    );
    coordinators.add(&node(lagging), servers.client(lagging));
    // Clients stop sending to it first, as a driver would once it is down;
    // what was in flight through it fails.
    coordinators.remove(&node(victim));
    let killed_at = Instant::now();
    servers.kill(victim);
    let acked_at_kill = load.writes_ok();
    // Keep writing until the survivors see it down, and at least 500 more.
    let down = format!("DN  127.61.0.{}:7100", victim + 1);
    eventually(Duration::from_secs(30), "the killed node is DN", || {
        servers.status_rows(0).iter().any(|r| r.starts_with(&down))
            && load.writes_ok() >= acked_at_kill + 500
    });
    let seen_down_at = Instant::now();
    let report = load.stop().await;
    eprintln!("load: {}", report.summary());
    assert!(report.stale_reads.is_empty(), "{:#?}", report.stale_reads);
    let (writes_while_down, reads_while_down) = report.completed_between(killed_at, seen_down_at);
    eprintln!(
        "between the kill and DN ({:?}): {writes_while_down} writes, {reads_while_down} reads",
        seen_down_at - killed_at
    );
    assert!(writes_while_down >= 500 && reads_while_down > 0);
    // With RF 3 and one node down, QUORUM keeps succeeding: the only
    // failures allowed are requests in flight through the killed node.
    let through_victim = report
        .failures
        .iter()
        .filter(|f| f.coordinator == node(victim))
        .count();
    let others: Vec<_> = report
        .failures
        .iter()
        .filter(|f| f.coordinator != node(victim))
        .collect();
    assert!(through_victim <= 8, "{:#?}", report.failures);
    // Requests in flight through the paused node may have timed out too, and
    // so may reads whose data replica was the paused node: a coordinator
    // waits `read_ms` (5 s) before it tops up from another replica, as long
    // as the clients wait. That is the missing speculative retry (#13), a
    // latency problem; any other failure, or one outside the pause, fails.
    let pause_window = paused_at..resumed_at + Duration::from_secs(6);
    let (slow_reads, others): (Vec<_>, Vec<_>) = others
        .into_iter()
        .filter(|f| f.coordinator != node(lagging))
        .partition(|f| f.op == "read" && f.status == "timeout" && pause_window.contains(&f.at));
    eprintln!(
        "reads that timed out on the paused replica: {}",
        slow_reads.len()
    );
    assert!(others.is_empty(), "failures through survivors: {others:#?}");
    for i in 0..4 {
        let pending = servers.info(i, "Hints pending");
        assert!(pending.starts_with("0 "), "node{i}: {pending}");
    }

    // The keys the killed node held: removenode restores their ranges.
    let mut admin = AdminClient::new(servers.channel(0, 7100));
    let mut held_by_victim = std::collections::HashSet::new();
    for key in report.acked.keys() {
        if endpoints(&mut admin, key).await.contains(&victim) {
            held_by_victim.insert(key.clone());
        }
    }
    let removed = servers.cli(0, &["removenode", &victim_id]);
    assert!(removed.status.success(), "{}", text(&removed.stderr));
    eprintln!("{}", text(&removed.stdout).trim());
    servers.wait_until_all_un(0, 4);

    // First (before QUORUM reads repair anything) each replica's own copy.
    let behind = copies_behind(&servers, &keyspace_id, &report).await;
    eprintln!(
        "replica copies behind their acknowledged version: {}{}",
        behind.len(),
        behind
            .iter()
            .take(20)
            .map(|(_, b)| format!("\n  {b}"))
            .collect::<String>()
    );
    // Repair-based removenode: every range the killed node held was synced
    // among all its new replicas, so each of its keys has RF copies of its
    // latest acknowledged version, whichever survivor had missed it.
    let restored_behind: Vec<&String> = behind
        .iter()
        .filter(|(key, _)| held_by_victim.contains(key))
        .map(|(_, b)| b)
        .collect();
    assert!(
        restored_behind.is_empty(),
        "{} of the {} keys the removed node held lack an up-to-date copy: {restored_behind:#?}",
        restored_behind.len(),
        held_by_victim.len()
    );
    // What the product promises: QUORUM reads see the latest acknowledged
    // version of every key.
    let (lost, later) = read_back(&servers, &[0, 1, 2, 3], &report).await;
    eprintln!(
        "after removenode: {} keys checked, {} lost, {later} at a later version; {:?} in all",
        report.acked.len(),
        lost.len(),
        began.elapsed()
    );
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:#?}");
    // Then a repair leaves every key with RF up-to-date copies. (That the
    // survivors differed is not certain here: the load rewrites every key
    // after the pause. `tests/repair.rs` removes a node whose survivors
    // certainly differ.)
    let repaired = servers.cli(0, &["repair", "ks"]);
    assert!(repaired.status.success(), "{}", text(&repaired.stderr));
    eprintln!("{}", text(&repaired.stdout).trim());
    let behind = copies_behind(&servers, &keyspace_id, &report).await;
    assert!(behind.is_empty(), "after repair: {behind:#?}");
}
