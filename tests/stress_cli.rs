//! `ringstore stress` as a user runs it: the real binary against one real
//! node started in process, its JSON report and its exit status.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

use common::eventually;
use ringstore_node::NodeConfig;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::admin_client::AdminClient;
use serde_json::Value;

/// This test's loopback address (no other test uses 127.40.x.x).
const IP: [u8; 4] = [127, 40, 0, 1];

/// Runs the real binary against the node, off the async runtime.
async fn ringstore(args: &[&str]) -> Output {
    let host = SocketAddr::from((IP, 7100)).to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .arg("--host")
            .arg(host)
            .args(args)
            .output()
            .expect("the ringstore binary runs")
    })
    .await
    .expect("the blocking task completes")
}

/// Runs `ringstore stress ... -n N --json` and checks its report is clean.
async fn stress(workload: &str, n: u64, extra: &[&str]) -> Value {
    let n_text = n.to_string();
    let mut args = vec!["stress", workload, "-n", &n_text, "--json"];
    args.extend_from_slice(extra);
    let out = ringstore(&args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{args:?} printed no single JSON object ({e}): {stdout}"));

    assert_eq!(report["workload"], workload, "{report}");
    assert_eq!(report["operations"], n, "{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert!(report["ops_per_second"].as_f64().unwrap() > 0.0, "{report}");
    assert!(
        report["elapsed_seconds"].as_f64().unwrap() > 0.0,
        "{report}"
    );
    let latency = |key: &str| report["latency_ms"][key].as_f64().unwrap();
    assert!(latency("p50") > 0.0, "{report}");
    assert!(latency("p50") <= latency("p95"), "{report}");
    assert!(latency("p95") <= latency("p99"), "{report}");
    assert!(latency("p99") <= latency("p999"), "{report}");
    assert!(latency("p999") <= latency("max"), "{report}");
    assert_eq!(report["consistency"], "ONE", "{report}");
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_writes_reads_and_noops_against_a_node_and_reports_json() {
    let dir = tempfile::tempdir().unwrap();
    let gossip = SocketAddr::from((IP, 7000));
    let config = NodeConfig {
        cluster_name: "test-40".into(),
        data_dir: dir.path().join("node"),
        listen_address: SocketAddr::from((IP, 7100)),
        internode_address: SocketAddr::from((IP, 7101)),
        gossip_address: gossip,
        seeds: vec![gossip],
        ring_delay_ms: 100,
        ..NodeConfig::default()
    };
    let node = ringstore_node::start(config).await.expect("node starts");
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", node.client_address))
        .unwrap()
        .connect_lazy();
    let admin = AdminClient::new(channel);
    eventually(Duration::from_secs(30), "the node is up and NORMAL", || {
        let mut admin = admin.clone();
        async move {
            let Ok(status) = admin.status(pb::StatusRequest::default()).await else {
                return false;
            };
            let nodes = status.into_inner().nodes;
            nodes.len() == 1 && nodes[0].up && nodes[0].state == "NORMAL"
        }
    })
    .await;

    let write = stress("write", 2000, &["--concurrency", "8", "--key-count", "500"]).await;
    assert_eq!(write["concurrency"], 8);
    assert_eq!(write["value_size"], 100);
    assert_eq!(write["token_aware"], false);
    stress("read", 1000, &[]).await;
    stress("noop", 1000, &[]).await;
    // Token-aware: the client learns the (one-node) ring and routes to it.
    let routed = stress("write", 1000, &["--token-aware", "--key-count", "500"]).await;
    assert_eq!(routed["token_aware"], true);
    stress("read", 500, &["--token-aware"]).await;

    // `--pipeline`: the same load on one stream per connection.
    let pipelines = || async {
        let mut admin = admin.clone();
        let page = admin.metrics(pb::MetricsRequest {}).await.unwrap();
        common::processes::sample(&page.into_inner().text, "ringstore_client_pipelines_total")
            .unwrap()
    };
    let before = pipelines().await;
    let piped = stress("write", 2000, &["--pipeline", "--key-count", "500"]).await;
    assert_eq!(piped["pipeline"], true);
    stress("read", 1000, &["--pipeline", "--connections", "2"]).await;
    stress("noop", 1000, &["--pipeline"]).await;
    assert_eq!(
        pipelines().await - before,
        4.0,
        "streams opened by the runs"
    );
    let both = ringstore(&["stress", "noop", "--pipeline", "--token-aware"]).await;
    assert_eq!(both.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&both.stderr).contains("--token-aware"));

    // `--threads N`: the runtime that sends has N workers.
    for threads in [1, 3] {
        let seen = stress_worker_threads(threads).await;
        assert_eq!(
            seen, threads,
            "stress --threads {threads} ran {seen} workers"
        );
    }

    let refused = ringstore(&["stress", "write", "--concurrency", "0"]).await;
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--concurrency"), "{stderr}");
    assert!(refused.stdout.is_empty());

    // One node cannot serve TWO: every operation fails, so the run stops with
    // the first error instead of reporting.
    let unavailable = ringstore(&["stress", "read", "-n", "500", "--consistency", "TWO"]).await;
    assert_eq!(unavailable.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unavailable.stderr);
    assert!(stderr.starts_with("UNAVAILABLE: "), "{stderr}");
    assert!(unavailable.stdout.is_empty());
    let unavailable = ringstore(&[
        "stress",
        "read",
        "-n",
        "200",
        "--consistency",
        "TWO",
        "--token-aware",
    ])
    .await;
    assert_eq!(unavailable.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unavailable.stderr);
    assert!(stderr.starts_with("UNAVAILABLE: "), "{stderr}");

    node.shutdown().await.expect("node stops");
}

/// Runs `stress noop --threads N` for two seconds and returns the most
/// tokio worker threads its process had at once (`/proc/PID/task/*/comm`).
async fn stress_worker_threads(threads: usize) -> usize {
    let host = SocketAddr::from((IP, 7100)).to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .args(["--host", &host, "stress", "noop", "--duration", "2s"])
            .args(["--concurrency", "4", "--threads", &threads.to_string()])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("the ringstore binary runs");
        let tasks = format!("/proc/{}/task", child.id());
        let mut most = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            let workers = std::fs::read_dir(&tasks)
                .into_iter()
                .flatten()
                .flatten()
                .filter(|task| {
                    std::fs::read_to_string(task.path().join("comm"))
                        .is_ok_and(|comm| comm.trim() == "tokio-rt-worker")
                })
                .count();
            most = most.max(workers);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            child.wait().unwrap().success(),
            "stress --threads {threads} failed"
        );
        most
    })
    .await
    .unwrap()
}

/// Requests coordinated by node `i` of `cluster` so far (writes, replica
/// or not), from its metrics.
async fn writes_coordinated(cluster: &common::TestCluster, i: usize) -> f64 {
    let page = cluster.metrics(i).await;
    ["true", "false"]
        .iter()
        .filter_map(|local| {
            let series = format!(
                "ringstore_coordinator_requests_total{{operation=\"write\",replica_local=\"{local}\"}}"
            );
            common::processes::sample(&page, &series)
        })
        .sum()
}

/// `--hosts` spreads the workers over the coordinators given, and
/// `--connections` is reported; the JSON names both; `--html` writes the
/// page of charts; `--warmup` sends load that the report leaves out.
/// Address block 55.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_spreads_its_workers_over_the_hosts_given() {
    let cluster = common::TestCluster::start(55, 3, 1).await;
    let hosts: Vec<String> = (0..3).map(|i| cluster.address(i).to_string()).collect();
    let before: Vec<f64> =
        futures::future::join_all((0..3).map(|i| writes_coordinated(&cluster, i))).await;
    let (first, all) = (hosts[0].clone(), hosts.join(","));
    let html = cluster.dir().join("report.html");
    let html_arg = html.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .args(["--host", &first, "stress", "write", "-n", "600", "--json"])
            .args(["--concurrency", "6", "--hosts", &all, "--connections", "2"])
            .args(["--html", &html_arg, "--warmup", "1s"])
            .args([
                "--replication",
                "SimpleStrategy:2",
                "--consistency",
                "QUORUM",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["operations"], 600, "{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert_eq!(report["connections"], 2, "{report}");
    assert_eq!(report["warmup_seconds"], 1.0, "{report}");
    assert_eq!(
        report["hosts"].as_array().map(Vec::len),
        Some(3),
        "{report}"
    );
    let mut total = 0.0;
    for (i, before) in before.iter().enumerate() {
        let coordinated = writes_coordinated(&cluster, i).await - before;
        // Six workers, two per host, each taking operations as answered:
        // every host coordinates a good share (a third would be exact).
        assert!(
            coordinated >= 100.0,
            "node {i} coordinated {coordinated} of 600"
        );
        total += coordinated;
    }
    // A second of closed-loop writes before the 600 measured ones (a
    // loopback write takes milliseconds, so far more than 60 of them).
    assert!(
        total >= 660.0,
        "{total} writes coordinated: the warm-up sent few or none"
    );
    // The HTML report: the summary, and the throughput and latency charts.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<title>ringstore stress write</title>"),
        "{page}"
    );
    assert!(page.contains("<td>operations</td><td>600</td>"), "{page}");
    assert_eq!(page.matches("<polyline").count(), 4, "{page}");
    cluster.shutdown().await;
}
