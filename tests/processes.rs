//! Real `ringstore server` processes on loopback (each test its own
//! 127.X.0.0/24 block), driven through the CLI as an operator would: status,
//! keyspaces, put/get/delete with exit statuses, a join planned and a node
//! added and decommissioned, a keyspace altered (in the background, then
//! waited for), a node stopped with SIGTERM, a joining node
//! killed with SIGKILL that resumes, and the CLI's errors.
//!
//! Address blocks of the tests on real processes (`common::processes`):
//! 30, 51 and 53 here, 60 and 61 in `tests/crash.rs`, 80 to 84 in
//! `tests/operations.rs`, 86 and 87 in `tests/tls.rs`, 88 in
//! `tests/secrets.rs` (85: `tests/internode_auth.rs`, in-process; 89 is
//! free, kept for security tests), 93, 94 and 97 in `tests/repair_processes.rs`
//! (in-process repair tests use 90–92, 95, 96), 120 in `tests/restore.rs`,
//! 150 to 152 in `tests/client_auth.rs` (153 and 154 kept for client-auth
//! tests), 160 to 164 in process for scans, export and import
//! (`tests/scan.rs`, `tests/export_import.rs`; `benches/scan_rss.sh` uses
//! 66), 170 to 176 in `tests/faults.rs` (with 127.<block>.1.x and .2.1 for
//! its proxies; 177 kept for it; 178 and 179 in `tests/cas_faults.rs`), 182 in `tests/clock_skew.rs` (180
//! and 181 there are in-process; 183 and 184 are kept for clock tests), 185
//! in `tests/demo_tls.rs` (`ringstore demo --tls` as a process), 186 in
//! `tests/fresh_start.rs`, 190 to 192 in `tests/client_library.rs` (193 and
//! 194: `benches/stress_token_aware.sh`), 197 in `tests/speculative_retry.rs`
//! (198: `tests/hot_keys.rs`, 200 and 201: `tests/pipeline.rs`, both
//! in-process), 204 and 211 in `tests/internode_auth.rs`, 212 and 214 in
//! `tests/rotation.rs`, 213 in `tests/secure_default.rs`, 215 in
//! `tests/gossip_forgery.rs`, 216 in `tests/late_writes.rs` (217 there is
//! in-process), 218 and 219 in `tests/damaged_disk.rs`, 220 in
//! `tests/first_session.rs` (`ringstore demo` as a process), 221 and 222 in
//! `tests/console_browser.rs` (the web console in headless Chromium). Other benches: 65, 66, 89, 98 to 104, 105
//! (`benches/fresh_cluster.sh`), 106 (`benches/allocator.sh`), 107
//! (`benches/bootstrap.sh`), 108 (`benches/slow_replica.sh`), 109
//! (`benches/full_read_rss.sh`), 110 to 112 (`benches/rate_latency.sh`,
//! `benches/hot_keys.sh`, `benches/compare_builds.sh`), 113 and 114
//! (`benches/peers.sh`'s compare-and-set section).

mod common;

use std::process::Command;
use std::time::Duration;

use common::processes::{Processes, eventually, text};

#[test]
fn an_operator_runs_a_three_process_cluster_from_the_cli() {
    let mut servers = Processes::new(30);
    for i in 0..3 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 3);
    // Without a cluster secret, every node says that its ports are open, to
    // loopback only (on another address it would refuse to start).
    for i in 0..3 {
        assert!(
            servers.log(i).contains(
                "no cluster secret: gossip and the internode port are open, to loopback only"
            ),
            "node {i} did not warn: {}",
            servers.log(i)
        );
    }

    servers.create_keyspace("ks", "SimpleStrategy:3");
    // The new keyspace has spread: one schema version, on every node.
    eventually(Duration::from_secs(20), "one schema version", || {
        let described = text(&servers.cli(2, &["describecluster"]).stdout);
        let versions: Vec<&str> = described
            .lines()
            .skip_while(|l| !l.contains("Schema versions:"))
            .skip(1)
            .take_while(|l| l.starts_with("\t\t"))
            .collect();
        versions.len() == 1
            && versions[0].matches(":7100").count() == 3
            && described.contains("\tLive: 3\n")
            && described.contains("\tks -> SimpleStrategy:3\n")
    });
    let gossip = text(&servers.cli(1, &["gossipinfo"]).stdout);
    assert_eq!(gossip.matches("\n  STATUS:NORMAL\n").count(), 3, "{gossip}");
    assert_eq!(gossip.matches("\n  LIVENESS:UP\n").count(), 3, "{gossip}");
    // Log levels change at runtime: one module's, then everything's, and
    // debug lines appear (the transport logs at debug on every request).
    let set = servers.cli(1, &["setlogginglevel", "ringstore_membership", "debug"]);
    assert_eq!(text(&set.stdout), "warn,ringstore_membership=debug\n");
    let set = servers.cli(1, &["setlogginglevel", "debug"]);
    assert_eq!(text(&set.stdout), "debug,ringstore_membership=debug\n");
    let levels = servers.cli(1, &["getlogginglevels"]);
    assert_eq!(text(&levels.stdout), "debug,ringstore_membership=debug\n");
    eventually(Duration::from_secs(20), "debug lines are logged", || {
        servers.cli(1, &["version"]);
        servers.log(1).contains("DEBUG")
    });
    let refused = servers.cli(1, &["setlogginglevel", "ringstore_membership", "loud"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("unknown log level"),
        "{}",
        text(&refused.stderr)
    );
    servers.cli(1, &["setlogginglevel", "warn"]);
    let flush = servers.cli(1, &["flush"]);
    assert!(flush.status.success(), "{}", text(&flush.stderr));
    let version = servers.cli(1, &["version"]);
    assert_eq!(
        text(&version.stdout),
        format!("ReleaseVersion: {}\n", env!("CARGO_PKG_VERSION"))
    );
    let put = servers.cli(
        0,
        &["put", "ks", "greeting", "hello", "--consistency", "QUORUM"],
    );
    assert!(put.status.success(), "{}", text(&put.stderr));
    let get = servers.cli(2, &["get", "ks", "greeting", "--consistency", "quorum"]);
    assert_eq!(
        (get.status.code(), text(&get.stdout)),
        (Some(0), "hello\n".to_string())
    );
    let hex = servers.cli(
        1,
        &[
            "get",
            "ks",
            "6772656574696e67",
            "--hex",
            "--consistency",
            "ALL",
        ],
    );
    assert_eq!(text(&hex.stdout), "68656c6c6f\n");
    assert!(
        servers
            .cli(1, &["delete", "ks", "greeting", "--consistency", "QUORUM"])
            .status
            .success()
    );
    let gone = servers.cli(2, &["get", "ks", "greeting", "--consistency", "QUORUM"]);
    assert_eq!(
        (gone.status.code(), text(&gone.stderr)),
        (Some(1), "not found\n".to_string())
    );

    // Grow and shrink from the CLI: plan a join, add a fourth node, see its
    // stream in netstats, then decommission it — the process exits by itself.
    let plan = servers.cli(0, &["plan", "join", "--dc", "dc1", "--rack", "rack4"]);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert!(
        text(&plan.stdout).contains("Estimated data to stream"),
        "{}",
        text(&plan.stdout)
    );
    for i in 0..40 {
        let key = format!("grow-{i}");
        assert!(
            servers
                .cli(0, &["put", "ks", &key, "v", "--consistency", "QUORUM"])
                .status
                .success()
        );
    }
    servers.start(3, &[]);
    servers.wait_until_all_un(0, 4);
    let netstats = servers.cli(3, &["netstats"]);
    assert!(
        text(&netstats.stdout).starts_with("Mode: NORMAL\n")
            && text(&netstats.stdout).contains("receiving"),
        "{}",
        text(&netstats.stdout)
    );
    let decommission = servers.cli(3, &["decommission"]);
    assert!(
        decommission.status.success(),
        "{}",
        text(&decommission.stderr)
    );
    assert!(
        text(&decommission.stdout).starts_with("decommissioned: "),
        "{}",
        text(&decommission.stdout)
    );
    let mut fourth = servers.take(3);
    let exit = fourth.wait().unwrap();
    assert!(
        exit.success(),
        "a decommissioned node exits cleanly: {exit:?}"
    );
    // Started again on its data it refuses, with the exit status that tells
    // a supervisor not to restart it (systemd: RestartPreventExitStatus=3).
    servers.start(3, &[]);
    let exit = servers.take(3).wait().unwrap();
    assert_eq!(
        exit.code(),
        Some(3),
        "a decommissioned node refuses to run again: {exit:?}"
    );
    eventually(Duration::from_secs(30), "three nodes remain", || {
        servers.status_rows(0).len() == 3
    });
    for i in 0..40 {
        let get = servers.cli(
            1,
            &["get", "ks", &format!("grow-{i}"), "--consistency", "QUORUM"],
        );
        assert_eq!(text(&get.stdout), "v\n");
    }

    // SIGTERM stops a node cleanly; the others see it down.
    let mut third = servers.take(2);
    Command::new("kill")
        .args(["-TERM", &third.id().to_string()])
        .status()
        .unwrap();
    let exit = third.wait().unwrap();
    assert!(exit.success(), "a SIGTERM'd node exits cleanly: {exit:?}");
    eventually(Duration::from_secs(30), "node 3 is DN", || {
        servers
            .status_rows(0)
            .iter()
            .any(|r| r.starts_with("DN  127.30.0.3:7100"))
    });
    let all = servers.cli(0, &["put", "ks", "k", "v", "--consistency", "ALL"]);
    assert_eq!(all.status.code(), Some(2));
    assert!(
        text(&all.stderr).starts_with("UNAVAILABLE: cannot achieve consistency level ALL"),
        "{}",
        text(&all.stderr)
    );
    let refused = servers.cli(2, &["status"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).contains("cannot connect to a node at 127.30.0.3:7100"),
        "{}",
        text(&refused.stderr)
    );
    let quorum = servers.cli(1, &["put", "ks", "k", "v", "--consistency", "QUORUM"]);
    assert!(quorum.status.success(), "{}", text(&quorum.stderr));
}

/// The bytes node `host` has received in range streams since it started.
fn stream_bytes_received(servers: &Processes, host: usize) -> u64 {
    let metrics = text(&servers.cli(host, &["metrics"]).stdout);
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("ringstore_stream_bytes_total{direction=\"received\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The mean completion of node `host`'s streams, from `netstats` ("(37.5%)").
fn stream_percent(servers: &Processes, host: usize) -> f64 {
    let shown = text(&servers.cli(host, &["netstats"]).stdout);
    let percents: Vec<f64> = shown
        .split('(')
        .filter_map(|part| part.split_once("%)"))
        .filter_map(|(number, _)| number.parse().ok())
        .collect();
    if percents.is_empty() {
        return 0.0;
    }
    percents.iter().sum::<f64>() / percents.len() as f64
}

#[test]
fn a_joining_process_killed_with_sigkill_resumes_its_bootstrap() {
    let mut servers = Processes::new(51);
    let slow = [("RINGSTORE_STREAM_THROUGHPUT_MIB_PER_SEC", "1")];
    for i in 0..3 {
        servers.start(i, &slow);
    }
    servers.wait_until_all_un(0, 3);
    // About 12 MiB on every node: some 3,000 keys of 4 KiB at RF 3.
    let stress = servers.cli(
        0,
        &[
            "stress",
            "write",
            "-n",
            "6000",
            "--key-count",
            "4000",
            "--value-size",
            "4096",
            "--keyspace",
            "ks",
            "--replication",
            "SimpleStrategy:3",
            "--consistency",
            "ALL",
        ],
    );
    assert!(stress.status.success(), "{}", text(&stress.stderr));
    let sample: Vec<(String, Vec<u8>)> = (0..100)
        .map(|k| format!("key{k}"))
        .filter_map(|key| {
            let read = servers.cli(0, &["get", "ks", &key, "--consistency", "ALL"]);
            read.status.success().then_some((key, read.stdout))
        })
        .collect();
    assert!(sample.len() > 40, "{} sampled keys", sample.len());

    // A fourth node joins; kill -9 it once its streams are 60% done.
    servers.start(3, &[]);
    eventually(
        Duration::from_secs(60),
        "the joining node is 60% through",
        || stream_percent(&servers, 3) >= 60.0,
    );
    let before_kill = stream_bytes_received(&servers, 3);
    let mut joining = servers.take(3);
    joining.kill().unwrap();
    joining.wait().unwrap();
    servers.start(3, &[]);
    servers.wait_until_all_un(0, 4);
    let after_restart = stream_bytes_received(&servers, 3);
    eprintln!("before the kill: {before_kill} bytes; after the restart: {after_restart} bytes");
    assert!(
        after_restart < before_kill,
        "the restarted node resumed: it fetched {after_restart} bytes after {before_kill} before the kill"
    );

    // Node 4 holds every sampled key it replicates: with the others killed,
    // it answers them alone.
    let fourth = servers.address(3, 7100);
    let mine: Vec<&(String, Vec<u8>)> = sample
        .iter()
        .filter(|(key, _)| {
            text(&servers.cli(0, &["getendpoints", "ks", key]).stdout).contains(&fourth)
        })
        .collect();
    assert!(!mine.is_empty());
    for i in 0..3 {
        let mut server = servers.take(i);
        server.kill().unwrap();
        server.wait().unwrap();
    }
    for (key, value) in mine {
        let read = servers.cli(3, &["get", "ks", key, "--consistency", "ONE"]);
        assert_eq!(&read.stdout, value, "{key}: {}", text(&read.stderr));
    }
}

#[test]
fn an_operator_alters_a_keyspace_from_the_cli_and_the_data_follows() {
    const KEYS: usize = 3000;
    let mut servers = Processes::new(53);
    for i in 0..3 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 3);
    servers.create_keyspace("ks", "SimpleStrategy:1");
    let mutations: String = (0..KEYS)
        .map(|k| format!("put key{k} value{k}-{}\n", "x".repeat(1000)))
        .collect();
    let batch = servers.cli_stdin(0, &mutations, &["batch", "ks"]);
    assert!(batch.status.success(), "{}", text(&batch.stderr));

    // Refused, naming the problem.
    let unknown = alter_keyspace(&servers, 0, "nope", "SimpleStrategy:2", false);
    assert_refused(&unknown, "nope");
    let too_many = alter_keyspace(&servers, 0, "ks", "SimpleStrategy:4", false);
    assert_refused(&too_many, "needs more nodes");

    let plan = servers.cli(
        0,
        &["plan", "alter", "ks", "--replication", "SimpleStrategy:3"],
    );
    let plan_text = text(&plan.stdout);
    assert!(plan.status.success(), "{}", text(&plan.stderr));
    assert!(
        plan_text.contains("alter of keyspace ks from SimpleStrategy:1 to SimpleStrategy:3")
            && plan_text.contains("Estimated data to stream: 5."),
        "two new copies of ~3 MiB: {plan_text}"
    );

    // In the background, slowly (1 MiB/s per sending node): the pending
    // replication shows in `keyspace list` and the streams in `netstats`.
    for i in 0..3 {
        assert!(
            servers
                .cli(i, &["setstreamthroughput", "1"])
                .status
                .success()
        );
    }
    let started = alter_keyspace(&servers, 1, "ks", "SimpleStrategy:3", true);
    assert!(started.status.success(), "{}", text(&started.stderr));
    assert!(
        text(&started.stdout).contains("moving to SimpleStrategy:3 in the background"),
        "{}",
        text(&started.stdout)
    );
    let list = text(&servers.cli(2, &["keyspace", "list"]).stdout);
    assert!(list.contains("(altering to SimpleStrategy:3)"), "{list}");
    eventually(
        Duration::from_secs(20),
        "netstats shows the alter's streams",
        || (0..3).any(|i| text(&servers.cli(i, &["netstats"]).stdout).contains("Alter receiving")),
    );
    eventually(Duration::from_secs(60), "the alter to RF 3 is done", || {
        let list = text(&servers.cli(0, &["keyspace", "list"]).stdout);
        list.contains("ks  SimpleStrategy:3") && !list.contains("altering")
    });
    // Every key is on all three nodes: a scan at ALL reads every replica.
    let scan = servers.cli(0, &["scan", "ks", "--consistency", "ALL"]);
    assert!(scan.status.success(), "{}", text(&scan.stderr));
    assert_eq!(text(&scan.stdout).lines().count(), KEYS);

    // Waited for: the command returns once the dropped replica cleaned up.
    for i in 0..3 {
        assert!(
            servers
                .cli(i, &["setstreamthroughput", "0"])
                .status
                .success()
        );
    }
    let lowered = alter_keyspace(&servers, 2, "ks", "SimpleStrategy:2", false);
    assert!(lowered.status.success(), "{}", text(&lowered.stderr));
    let summary = text(&lowered.stdout);
    assert!(
        summary.contains("keyspace ks now has SimpleStrategy:2: 0 ranges streamed")
            && summary.contains(&format!("{KEYS} keys removed")),
        "one of the three copies is deleted: {summary}"
    );
    let scan = servers.cli(1, &["scan", "ks", "--consistency", "ALL"]);
    assert!(scan.status.success(), "{}", text(&scan.stderr));
    let rows = text(&scan.stdout);
    assert_eq!(rows.lines().count(), KEYS);
    assert!(rows.lines().all(|row| {
        let (key, value) = row.split_once(' ').unwrap();
        value.starts_with(&format!("value{}-", &key["key".len()..]))
    }));

    // The node driving an alter is killed once it has announced it: the
    // keyspace stays pending (writes to both placements), another
    // replication is refused meanwhile, and asking again anywhere resumes it.
    let started = alter_keyspace(&servers, 1, "ks", "SimpleStrategy:3", true);
    assert!(started.status.success(), "{}", text(&started.stderr));
    servers.kill(1);
    servers.start(1, &[]);
    servers.wait_until_all_un(0, 3);
    let list = text(&servers.cli(0, &["keyspace", "list"]).stdout);
    assert!(list.contains("(altering to SimpleStrategy:3)"), "{list}");
    let other = alter_keyspace(&servers, 0, "ks", "SimpleStrategy:1", false);
    assert_refused(&other, "is being altered to SimpleStrategy:3");
    let resumed = alter_keyspace(&servers, 0, "ks", "SimpleStrategy:3", false);
    assert!(resumed.status.success(), "{}", text(&resumed.stderr));
    assert!(
        text(&resumed.stdout).contains("keyspace ks now has SimpleStrategy:3"),
        "{}",
        text(&resumed.stdout)
    );
    let scan = servers.cli(2, &["scan", "ks", "--consistency", "ALL"]);
    assert!(scan.status.success(), "{}", text(&scan.stderr));
    assert_eq!(text(&scan.stdout).lines().count(), KEYS);
    servers.kill_all();
}

/// `keyspace alter NAME --replication REPLICATION [--async]` on node `host`.
fn alter_keyspace(
    servers: &Processes,
    host: usize,
    name: &str,
    replication: &str,
    at_once: bool,
) -> std::process::Output {
    let mut args = vec!["keyspace", "alter", name, "--replication", replication];
    if at_once {
        args.push("--async");
    }
    servers.cli(host, &args)
}

/// Checks that a CLI call failed, saying `reason`.
fn assert_refused(output: &std::process::Output, reason: &str) {
    assert!(!output.status.success(), "{}", text(&output.stdout));
    assert!(
        text(&output.stderr).contains(reason),
        "{}",
        text(&output.stderr)
    );
}
