//! Operating real `ringstore server` processes: the Prometheus endpoint
//! after a workload, `tpstats`, `proxyhistograms` and `tablestats` counting
//! what was done, and `drain`. Address blocks 80 to 84 (see the list in
//! `tests/processes.rs`).

mod common;

use std::time::Duration;

use common::processes::{Processes, eventually, http_get, sample, text};

/// Puts, gets and deletes of this many keys: `PUTS` puts of distinct keys
/// at QUORUM, then gets at ONE and deletes at QUORUM of the first ones.
const PUTS: usize = 20;
const GETS: usize = 10;
const DELETES: usize = 5;

/// Two nodes with keyspace `ks` at RF 2; the workload above through node 0.
fn two_nodes_after_a_workload(block: u8, node1_env: &[(&str, &str)]) -> Processes {
    let mut servers = Processes::new(block);
    servers.start(0, &[]);
    servers.start(1, node1_env);
    servers.wait_until_all_un(0, 2);
    servers.create_keyspace("ks", "SimpleStrategy:2");
    for i in 0..PUTS {
        let key = format!("key-{i}");
        let put = servers.cli(0, &["put", "ks", &key, "value", "--consistency", "QUORUM"]);
        assert!(put.status.success(), "{}", text(&put.stderr));
    }
    for i in 0..GETS {
        let get = servers.cli(0, &["get", "ks", &format!("key-{i}")]);
        assert_eq!(text(&get.stdout), "value\n", "{}", text(&get.stderr));
    }
    for i in 0..DELETES {
        let key = format!("key-{i}");
        let delete = servers.cli(0, &["delete", "ks", &key, "--consistency", "QUORUM"]);
        assert!(delete.status.success(), "{}", text(&delete.stderr));
    }
    servers
}

#[test]
fn the_metrics_endpoint_counts_every_request_of_a_workload_and_shows_every_family() {
    let servers =
        two_nodes_after_a_workload(80, &[("RINGSTORE_METRICS_ADDRESS", "127.80.0.2:7299")]);
    // Two failures: a keyspace that does not exist, a level RF 2 cannot meet.
    let missing = servers.cli(0, &["put", "nope", "k", "v"]);
    assert_eq!(missing.status.code(), Some(2));
    let unavailable = servers.cli(0, &["put", "ks", "k", "v", "--consistency", "THREE"]);
    assert_eq!(unavailable.status.code(), Some(2));

    let (status, page) = http_get(&servers.address(0, 7200), "/metrics");
    assert_eq!(status, 200, "{page}");
    let value = |series: &str| {
        sample(&page, series).unwrap_or_else(|| panic!("{series} missing from:\n{page}"))
    };
    let (puts, gets, deletes) = (PUTS as f64, GETS as f64, DELETES as f64);
    let quorum_put = "{consistency=\"QUORUM\",operation=\"put\"}";
    assert_eq!(
        value(&format!("ringstore_client_requests_total{quorum_put}")),
        puts
    );
    assert_eq!(
        value(&format!(
            "ringstore_client_request_duration_seconds_count{quorum_put}"
        )),
        puts
    );
    assert!(
        value(&format!(
            "ringstore_client_request_duration_seconds_sum{quorum_put}"
        )) > 0.0
    );
    assert_eq!(
        value("ringstore_client_requests_total{consistency=\"ONE\",operation=\"get\"}"),
        gets
    );
    assert_eq!(
        value("ringstore_client_requests_total{consistency=\"QUORUM\",operation=\"delete\"}"),
        deletes
    );
    assert_eq!(
        value(
            "ringstore_client_request_errors_total{code=\"NOT_FOUND\",consistency=\"ONE\",operation=\"put\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            "ringstore_client_request_errors_total{code=\"UNAVAILABLE\",consistency=\"THREE\",operation=\"put\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            &page,
            "ringstore_client_request_errors_total{code=\"UNAVAILABLE\",consistency=\"QUORUM\",operation=\"put\"}"
        ),
        None,
        "no QUORUM put failed"
    );
    assert_eq!(
        value("ringstore_coordinator_unavailables_total{operation=\"write\"}"),
        1.0
    );
    assert_eq!(
        value("ringstore_coordinator_timeouts_total{operation=\"write\"}"),
        0.0
    );
    // The unavailable write was coordinated too; the missing keyspace never got there.
    assert_eq!(
        value("ringstore_coordinator_duration_seconds_count{operation=\"write\"}"),
        puts + deletes + 1.0
    );
    assert_eq!(
        value("ringstore_coordinator_duration_seconds_count{operation=\"read\"}"),
        gets
    );
    assert_eq!(value("ringstore_read_repairs_total"), 0.0);
    // Every write reached the other replica through one Apply call.
    let peer = servers.address(1, 7101);
    assert_eq!(
        value(&format!(
            "ringstore_internode_request_duration_seconds_count{{peer=\"{peer}\",rpc=\"apply\"}}"
        )),
        puts + deletes
    );
    assert!(value("ringstore_storage_sync_duration_seconds_count") >= 1.0);
    // Batch durability: the local writes waited for commit log syncs.
    assert!(value("ringstore_commitlog_sync_duration_seconds_count") >= 1.0);
    assert_eq!(
        value("ringstore_keyspace_local_requests_total{keyspace=\"ks\",operation=\"write\"}"),
        puts + deletes
    );
    assert_eq!(value("ringstore_keyspace_keys{keyspace=\"ks\"}"), puts);
    assert_eq!(
        value("ringstore_keyspace_tombstones{keyspace=\"ks\"}"),
        deletes
    );
    assert!(value("ringstore_keyspace_bytes{keyspace=\"ks\"}") > puts * 10.0);
    assert_eq!(value("ringstore_gossip_members{liveness=\"up\"}"), 2.0);
    assert_eq!(value("ringstore_gossip_members{liveness=\"down\"}"), 0.0);
    assert!(value("ringstore_gossip_packets_total{direction=\"received\"}") > 0.0);
    assert!(value("ringstore_ring_epoch") >= 1.0);
    let schema = text(&servers.cli(0, &["describecluster"]).stdout);
    let version = page
        .lines()
        .find_map(|l| l.strip_prefix("ringstore_schema_info{version=\""))
        .and_then(|l| l.split('"').next())
        .unwrap_or_else(|| panic!("no schema version in:\n{page}"));
    assert!(schema.contains(version), "{version} not in:\n{schema}");
    assert!(page.contains("\nringstore_ring_info{checksum=\""), "{page}");
    assert_eq!(value("ringstore_hints_stored_total"), 0.0);
    assert_eq!(
        value("ringstore_stream_bytes_total{direction=\"received\"}"),
        0.0
    );
    assert_eq!(value("ringstore_streams_running"), 0.0);
    assert_eq!(
        value("ringstore_stage_completed_total{stage=\"ClientRequest\"}"),
        puts + gets + deletes + 2.0
    );
    assert!(page.contains("# TYPE ringstore_client_request_duration_seconds histogram\n"));

    // The same page through the Metrics RPC, and the other node's endpoint
    // where it was configured.
    let cli = text(&servers.cli(0, &["metrics"]).stdout);
    assert_eq!(
        sample(
            &cli,
            &format!("ringstore_client_requests_total{quorum_put}")
        ),
        Some(puts)
    );
    let (status, other) = http_get("127.80.0.2:7299", "/metrics");
    assert_eq!(status, 200);
    assert_eq!(
        sample(
            &other,
            "ringstore_keyspace_local_requests_total{keyspace=\"ks\",operation=\"write\"}"
        ),
        Some(puts + deletes)
    );
    assert!(std::net::TcpStream::connect("127.80.0.2:7200").is_err());
    let (status, _) = http_get(&servers.address(0, 7200), "/nothing");
    assert_eq!(status, 404);
}

/// The number after `label` on the line that starts with it (after tabs).
fn field(text: &str, label: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn tpstats_proxyhistograms_and_tablestats_count_what_a_workload_did() {
    let servers = two_nodes_after_a_workload(81, &[]);
    let total = (PUTS + GETS + DELETES) as f64;

    // Node 1 coordinated nothing: every write reached it through one Apply.
    let tables = text(&servers.cli(1, &["tablestats", "ks"]).stdout);
    assert!(
        tables.starts_with("Total number of tables: 1\n"),
        "{tables}"
    );
    assert!(tables.contains("Keyspace : ks\n"), "{tables}");
    assert_eq!(
        field(&tables, "Number of partitions:"),
        Some(PUTS as f64),
        "{tables}"
    );
    assert_eq!(
        field(&tables, "Tombstones:"),
        Some(DELETES as f64),
        "{tables}"
    );
    assert_eq!(
        field(&tables, "Write Count:"),
        Some((PUTS + DELETES) as f64),
        "{tables}"
    );
    assert!(
        field(&tables, "Write Latency:").is_some_and(|ms| ms > 0.0),
        "{tables}"
    );
    assert!(
        field(&tables, "Space used (live):").is_some_and(|b| b > 0.0),
        "{tables}"
    );
    // Each get at ONE read one replica, on one node or the other.
    let reads: f64 = (0..2)
        .map(|i| {
            field(
                &text(&servers.cli(i, &["tablestats"]).stdout),
                "Read Count:",
            )
            .unwrap()
        })
        .sum();
    assert_eq!(reads, GETS as f64);
    let missing = servers.cli(0, &["tablestats", "nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        text(&missing.stderr).contains("\"nope\" does not exist"),
        "{}",
        text(&missing.stderr)
    );

    let pools = text(&servers.cli(0, &["tpstats"]).stdout);
    assert!(
        pools.starts_with("Pool Name                         Active   Pending      Completed"),
        "{pools}"
    );
    let completed = |pools: &str, stage: &str| -> f64 {
        let row = pools
            .lines()
            .find(|l| l.starts_with(&format!("{stage} ")))
            .unwrap_or_else(|| panic!("no {stage} row in:\n{pools}"));
        row.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    assert_eq!(completed(&pools, "ClientRequest"), total, "{pools}");
    assert!(
        pools.contains("\nMessage type           Dropped\n"),
        "{pools}"
    );
    let replica = text(&servers.cli(1, &["tpstats"]).stdout);
    assert_eq!(
        completed(&replica, "InternodeApply"),
        (PUTS + DELETES) as f64,
        "{replica}"
    );
    assert_eq!(completed(&replica, "ClientRequest"), 0.0, "{replica}");
    // A garbage-collection pass over one keyspace is one compaction.
    let before = completed(&replica, "CompactionExecutor");
    let collected = servers.cli(1, &["garbagecollect", "ks"]);
    assert!(collected.status.success(), "{}", text(&collected.stderr));
    let after = text(&servers.cli(1, &["tpstats"]).stdout);
    assert_eq!(
        completed(&after, "CompactionExecutor"),
        before + 1.0,
        "{after}"
    );

    let histograms = text(&servers.cli(0, &["proxyhistograms"]).stdout);
    assert!(
        histograms
            .starts_with("proxy histograms\nPercentile       Read Latency      Write Latency\n"),
        "{histograms}"
    );
    let row = |name: &str| -> (f64, f64) {
        let line = histograms
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} row in:\n{histograms}"));
        let numbers: Vec<f64> = line
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap())
            .collect();
        (numbers[0], numbers[1])
    };
    let (min, median, p99, max) = (row("Min"), row("50%"), row("99%"), row("Max"));
    for (low, high) in [(min, median), (median, p99), (p99, max)] {
        assert!(low.0 <= high.0 && low.1 <= high.1, "{histograms}");
    }
    assert!(min.0 > 0.0 && min.1 > 0.0, "{histograms}");
    let idle = text(&servers.cli(1, &["proxyhistograms"]).stdout);
    assert!(
        idle.contains("\n50%                      0.00               0.00\n"),
        "{idle}"
    );
}

#[test]
fn a_drained_node_refuses_writes_has_synced_its_data_and_is_seen_down() {
    let mut servers = Processes::new(82);
    // Node 1 syncs only when asked: what it holds after a SIGKILL is what
    // the drain synced.
    let unsynced = [
        ("RINGSTORE_STORAGE__DURABILITY", "periodic"),
        ("RINGSTORE_STORAGE__PERIODIC_SYNC_MS", "3600000"),
    ];
    servers.start(0, &[]);
    servers.start(1, &unsynced);
    servers.wait_until_all_un(0, 2);
    servers.create_keyspace("ks", "SimpleStrategy:2");
    for i in 0..10 {
        let key = format!("before-{i}");
        let put = servers.cli(1, &["put", "ks", &key, "v", "--consistency", "ALL"]);
        assert!(put.status.success(), "{}", text(&put.stderr));
    }

    let drain = servers.cli(1, &["drain"]);
    assert!(drain.status.success(), "{}", text(&drain.stderr));
    assert!(
        text(&drain.stdout).starts_with("drained"),
        "{}",
        text(&drain.stdout)
    );
    let refused = servers.cli(1, &["put", "ks", "after", "v"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr).starts_with("UNAVAILABLE: this node is drained (ringstore drain)"),
        "{}",
        text(&refused.stderr)
    );
    assert!(servers.info(1, "Gossip active").contains("false"));
    // Reads are still served; the cluster sees the node down and writes go on.
    let get = servers.cli(1, &["get", "ks", "before-3"]);
    assert_eq!(text(&get.stdout), "v\n", "{}", text(&get.stderr));
    eventually(Duration::from_secs(30), "node 0 sees node 1 down", || {
        servers
            .status_rows(0)
            .iter()
            .any(|r| r.starts_with("DN  127.82.0.2:7100"))
    });
    assert!(servers.cli(0, &["disablehandoff"]).status.success());
    let elsewhere = servers.cli(0, &["put", "ks", "after", "v", "--consistency", "ONE"]);
    assert!(elsewhere.status.success(), "{}", text(&elsewhere.stderr));

    // Killed and restarted, node 1 still holds every write made before the drain.
    servers.kill(1);
    servers.start(1, &unsynced);
    eventually(Duration::from_secs(30), "node 1 answers again", || {
        servers.cli(1, &["tablestats", "ks"]).status.success()
    });
    let tables = text(&servers.cli(1, &["tablestats", "ks"]).stdout);
    assert_eq!(
        field(&tables, "Number of partitions:"),
        Some(10.0),
        "{tables}"
    );
}

#[test]
fn the_server_writes_one_json_object_per_log_line_with_log_format_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let address = |port: u16| format!("127.83.0.1:{port}");
    let mut server = std::process::Command::new(env!("CARGO_BIN_EXE_ringstore"))
        .args([
            "--log-format",
            "json",
            "server",
            "--cluster-name",
            "json-logs",
        ])
        .args(["--data-dir", dir.path().join("data").to_str().unwrap()])
        .args(["--listen-address", &address(7100)])
        .args(["--internode-address", &address(7101)])
        .args(["--gossip-address", &address(7000)])
        .args(["--seeds", &address(7000)])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut lines = Vec::new();
    eventually(Duration::from_secs(30), "the node logs its start", || {
        lines = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        lines.iter().any(|l| l.contains("node starting"))
    });
    server.kill().unwrap();
    server.wait().unwrap();
    for line in &lines {
        let object: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON object ({e}): {line}"));
        assert!(object["timestamp"].is_string(), "{line}");
        assert!(object["level"].is_string(), "{line}");
    }
    let start: serde_json::Value = lines
        .iter()
        .find(|l| l.contains("node starting"))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap();
    assert_eq!(start["level"], "INFO");
    assert_eq!(start["fields"]["message"], "node starting");
    assert_eq!(start["fields"]["cluster"], "json-logs");
    assert!(start["fields"]["host_id"].is_string(), "{start}");
    assert_eq!(start["target"], "ringstore_node::node");
}

#[test]
fn the_server_raises_its_soft_open_files_limit_to_the_hard_one() {
    let dir = tempfile::tempdir().unwrap();
    let address = |port: u16| format!("127.231.0.1:{port}");
    // Started with a soft limit of 256 (the shell's `ulimit -Sn`), as a
    // service manager's default of 1,024 would be.
    let script = format!(
        "ulimit -Sn 256 && exec {} server --cluster-name nofile --data-dir {} \
         --listen-address {} --internode-address {} --gossip-address {} --seeds {}",
        env!("CARGO_BIN_EXE_ringstore"),
        dir.path().join("data").display(),
        address(7100),
        address(7101),
        address(7000),
        address(7000),
    );
    let server = KilledOnDrop(
        std::process::Command::new("sh")
            .args(["-c", &script])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let proc = format!("/proc/{}", server.0.id());
    // (soft, hard) of "Max open files", once the shell has become the node.
    let open_files = || {
        let command = std::fs::read(format!("{proc}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&command).contains("nofile") {
            return None;
        }
        let text = std::fs::read_to_string(format!("{proc}/limits")).unwrap_or_default();
        let line = text.lines().find(|l| l.starts_with("Max open files"))?;
        let fields: Vec<&str> = line.split_whitespace().collect();
        Some((fields[3].to_string(), fields[4].to_string()))
    };
    eventually(Duration::from_secs(30), "the soft limit is raised", || {
        open_files().is_some_and(|(soft, hard)| soft == hard && soft != "256")
    });
}

/// A child process killed (and reaped) when dropped, failed assertions
/// included, so a failing test leaves no server holding its addresses.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the CLI against node 0, which must succeed; its output.
fn ok(servers: &Processes, args: &[&str]) -> String {
    let output = servers.cli(0, args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        text(&output.stderr)
    );
    text(&output.stdout)
}

#[test]
fn a_snapshot_restored_into_a_fresh_node_with_the_same_tokens_gives_back_the_same_cells() {
    let mut servers = Processes::new(84);
    let tokens = [
        ("RINGSTORE_NUM_TOKENS", "2"),
        (
            "RINGSTORE_INITIAL_TOKEN",
            "-3000000000000000000,4000000000000000000",
        ),
    ];
    servers.start(0, &tokens);
    servers.wait_until_all_un(0, 1);
    servers.create_keyspace("ks", "SimpleStrategy:1");
    for i in 0..30 {
        ok(
            &servers,
            &["put", "ks", &format!("key-{i}"), &format!("value-{i}")],
        );
    }
    for i in 0..5 {
        ok(&servers, &["delete", "ks", &format!("key-{i}")]);
    }
    ok(
        &servers,
        &["put", "ks", "expiring", "soon", "--ttl", "3600"],
    );

    let taken = ok(&servers, &["snapshot", "-t", "before-upgrade", "ks"]);
    assert!(
        taken.starts_with(
            "Requested creating snapshot(s) for [ks] with snapshot name [before-upgrade]"
        ),
        "{taken}"
    );
    // Later writes are not in it.
    ok(&servers, &["put", "ks", "after", "v"]);
    ok(&servers, &["put", "ks", "key-10", "changed"]);
    let listed = ok(&servers, &["listsnapshots"]);
    let row = listed
        .lines()
        .find(|l| l.starts_with("before-upgrade "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(row.split_whitespace().nth(2), Some("31"), "{listed}");
    let again = servers.cli(0, &["snapshot", "-t", "before-upgrade"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).starts_with("ALREADY_EXISTS: snapshot before-upgrade exists"),
        "{}",
        text(&again.stderr)
    );
    let bad = servers.cli(0, &["snapshot", "-t", "../up"]);
    assert!(
        text(&bad.stderr).starts_with("INVALID_ARGUMENT: invalid snapshot tag"),
        "{}",
        text(&bad.stderr)
    );
    let missing = servers.cli(0, &["snapshot", "nope"]);
    assert!(
        text(&missing.stderr).contains("\"nope\" does not exist"),
        "{}",
        text(&missing.stderr)
    );

    // A fresh node with the same tokens, the snapshot copied into its data
    // directory, restores it.
    servers.kill(0);
    let old = servers.data_dir(0).with_file_name("old-node0");
    std::fs::rename(servers.data_dir(0), &old).unwrap();
    servers.start(0, &tokens);
    servers.wait_until_all_un(0, 1);
    servers.create_keyspace("ks", "SimpleStrategy:1");
    let copied = servers.data_dir(0).join("snapshots/before-upgrade");
    std::fs::create_dir_all(&copied).unwrap();
    let original = std::fs::read(old.join("snapshots/before-upgrade/ks.cells")).unwrap();
    std::fs::write(copied.join("ks.cells"), &original).unwrap();
    let restored = ok(&servers, &["restore", "-t", "before-upgrade"]);
    assert_eq!(
        restored,
        "restored 31 keys of ks from snapshot before-upgrade\n"
    );
    assert_eq!(ok(&servers, &["get", "ks", "key-10"]), "value-10\n");
    assert_eq!(ok(&servers, &["get", "ks", "expiring"]), "soon\n");
    assert_eq!(
        servers.cli(0, &["get", "ks", "key-3"]).status.code(),
        Some(1)
    );
    assert_eq!(
        servers.cli(0, &["get", "ks", "after"]).status.code(),
        Some(1)
    );
    // Byte for byte: a snapshot of the restored node is the original file.
    ok(&servers, &["snapshot", "-t", "check", "ks"]);
    let again = std::fs::read(servers.data_dir(0).join("snapshots/check/ks.cells")).unwrap();
    assert!(
        again == original,
        "the restored cells differ from the snapshot"
    );

    assert_eq!(
        ok(&servers, &["clearsnapshot", "-t", "check"]),
        "removed snapshots: [check]\n"
    );
    assert!(!ok(&servers, &["listsnapshots"]).contains("check"));
    let neither = servers.cli(0, &["clearsnapshot"]);
    assert_eq!(neither.status.code(), Some(2));
    assert_eq!(
        ok(&servers, &["clearsnapshot", "--all"]),
        "removed snapshots: [before-upgrade]\n"
    );
    assert!(ok(&servers, &["listsnapshots"]).contains("There are no snapshots"));
}
