//! Lightweight transactions as a user reaches them: the real binary's
//! `putif`, `deleteif` and `getserial` against an in-process cluster (block
//! 243), their answers, exit statuses and errors; `ringstore stress cas`
//! uncontended and contended (block 244); and the client library routing
//! a key's compare-and-sets to its first replica (block 245).

mod common;

use std::process::{Command, Output};

use common::TestCluster;
use ringstore_client::{Client, ClientConfig, ClientError, expect, pb};
use serde_json::Value;

const KS: &str = "lwt";

/// Runs the real binary against node 0 of `cluster`, off the runtime.
async fn ringstore(cluster: &TestCluster, args: &[&str]) -> Output {
    let host = cluster.address(0).to_string();
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

/// Runs `args` and checks its exit status, stdout and stderr.
async fn expect_run(cluster: &TestCluster, args: &[&str], code: i32, stdout: &str, stderr: &str) {
    let out = ringstore(cluster, args).await;
    let (out_text, err_text) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        (out.status.code(), out_text.as_ref(), err_text.as_ref()),
        (Some(code), stdout, stderr),
        "{args:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn putif_deleteif_and_getserial_answer_as_cassandras_applied_row() {
    let cluster = TestCluster::start(243, 3, 1).await;
    cluster.create_keyspace(0, KS, 3).await;
    let c = &cluster;

    expect_run(
        c,
        &["putif", KS, "user", "alice", "--if-absent"],
        0,
        "applied\n",
        "",
    )
    .await;
    // The condition fails: the current value on stdout, exit status 1,
    // nothing on stderr.
    expect_run(
        c,
        &["putif", KS, "user", "bob", "--if-absent"],
        1,
        "not applied; current value: alice\n",
        "",
    )
    .await;
    expect_run(
        c,
        &[
            "putif",
            KS,
            "user",
            "bob",
            "--if-value",
            "alice",
            "--token-aware",
            "--commit",
            "QUORUM",
        ],
        0,
        "applied\n",
        "",
    )
    .await;
    expect_run(c, &["getserial", KS, "user"], 0, "bob\n", "").await;
    // Committed at QUORUM before the answer: a plain QUORUM read sees it.
    expect_run(
        c,
        &["get", KS, "user", "--consistency", "QUORUM"],
        0,
        "bob\n",
        "",
    )
    .await;
    expect_run(
        c,
        &["deleteif", KS, "user", "--if-value", "alice"],
        1,
        "not applied; current value: bob\n",
        "",
    )
    .await;
    expect_run(
        c,
        &[
            "deleteif",
            KS,
            "user",
            "--if-value",
            "bob",
            "--commit",
            "QUORUM",
        ],
        0,
        "applied\n",
        "",
    )
    .await;
    expect_run(
        c,
        &["getserial", KS, "user", "--token-aware"],
        1,
        "",
        "not found\n",
    )
    .await;
    expect_run(
        c,
        &["putif", KS, "user", "carol", "--if-value", "bob"],
        1,
        "not applied; key absent\n",
        "",
    )
    .await;
    // --any: a linearizable put; a TTL, LOCAL_SERIAL (one DC: all
    // replicas), a commit level.
    expect_run(
        c,
        &[
            "putif",
            KS,
            "user",
            "dave",
            "--any",
            "--ttl",
            "3600",
            "--serial",
            "local-serial",
            "--commit",
            "local_quorum",
        ],
        0,
        "applied\n",
        "",
    )
    .await;
    expect_run(
        c,
        &["getserial", KS, "user", "--serial", "local-serial"],
        0,
        "dave\n",
        "",
    )
    .await;
    // Hex keys and values.
    expect_run(
        c,
        &["putif", KS, "6b00", "ff01", "--if-absent", "--hex"],
        0,
        "applied\n",
        "",
    )
    .await;
    expect_run(
        c,
        &["putif", KS, "6b00", "02", "--if-value", "ff00", "--hex"],
        1,
        "not applied; current value: ff01\n",
        "",
    )
    .await;
    expect_run(c, &["getserial", KS, "6b00", "--hex"], 0, "ff01\n", "").await;

    // A refusal names the problem and is certainly not applied (exit 2).
    let missing = ringstore(c, &["putif", "nosuch", "k", "v", "--any"]).await;
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("NOT_FOUND: "), "{stderr}");
    assert!(stderr.contains("nosuch"), "{stderr}");
    assert!(!stderr.contains("unknown"), "{stderr}");
    let usage = ringstore(c, &["putif", KS, "k", "v"]).await;
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("--if-absent"));

    // No answer in time: the outcome is unknown, and the message says how
    // to learn it (exit status 4).
    let hurried = ringstore(
        c,
        &[
            "--request-timeout",
            "0.000001",
            "putif",
            KS,
            "late key",
            "v",
            "--any",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&hurried.stderr);
    assert_eq!(hurried.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("the result is unknown"), "{stderr}");
    assert!(
        stderr.contains("`ringstore getserial lwt 'late key'`"),
        "{stderr}"
    );
    assert!(hurried.stdout.is_empty());

    // Paxos repair collects this node's state: one line per keyspace.
    let repaired = ringstore(c, &["repair", "--paxos-only", KS]).await;
    let stdout = String::from_utf8_lossy(&repaired.stdout);
    assert_eq!(repaired.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("lwt: finished ") && stdout.contains(" 0 failed; purged "),
        "{stdout}"
    );
    let unknown = ringstore(c, &["repair", "--paxos-only", "nosuch"]).await;
    assert_ne!(unknown.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("nosuch"));
    let mixed = ringstore(c, &["repair", "--paxos-only", "--dry-run", KS]).await;
    assert_eq!(mixed.status.code(), Some(2), "a usage error");
    cluster.shutdown().await;
}

/// Runs `ringstore stress cas ... --json` against node 0; its report.
async fn stress_cas(cluster: &TestCluster, keyspace: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "stress",
        "cas",
        "--json",
        "--keyspace",
        keyspace,
        "--replication",
        "SimpleStrategy:3",
    ];
    args.extend_from_slice(extra);
    let out = ringstore(cluster, &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed: {stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{args:?} printed no single JSON object ({e}): {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_cas_reports_applied_not_applied_and_unknown_uncontended_and_contended() {
    let cluster = TestCluster::start(244, 3, 1).await;

    // Uncontended: every worker has keys of its own, on fresh keys, so
    // every compare-and-set applies.
    let alone = stress_cas(
        &cluster,
        "alone",
        &[
            "-n",
            "300",
            "--concurrency",
            "4",
            "--keys",
            "1000",
            "--token-aware",
        ],
    )
    .await;
    assert_eq!(alone["workload"], "cas", "{alone}");
    assert_eq!(alone["operations"], 300, "{alone}");
    assert_eq!(alone["errors"], serde_json::json!({}), "{alone}");
    assert_eq!(alone["cas"]["contended"], false, "{alone}");
    assert_eq!(alone["cas"]["applied"], 300, "{alone}");
    assert_eq!(alone["cas"]["not_applied"], 0, "{alone}");
    assert_eq!(alone["cas"]["unknown"], 0, "{alone}");
    assert_eq!(alone["cas"]["serial"], "SERIAL", "{alone}");
    let latency = |report: &Value, key: &str| report["latency_ms"][key].as_f64().unwrap();
    assert!(latency(&alone, "p50") > 0.0, "{alone}");
    assert!(latency(&alone, "p50") <= latency(&alone, "p99"), "{alone}");
    assert!(latency(&alone, "p99") <= latency(&alone, "p999"), "{alone}");

    // Contended: 8 workers race on one key through every coordinator in
    // turn. Every answer counts; the races lost are the not-applied ones,
    // and the counter holds exactly the applied increments (give or take
    // the unknown ones).
    let hosts: Vec<String> = (0..3).map(|i| cluster.address(i).to_string()).collect();
    let hosts = hosts.join(",");
    let raced = stress_cas(
        &cluster,
        "raced",
        &[
            "-n",
            "200",
            "--concurrency",
            "8",
            "--keys",
            "1",
            "--contended",
            "--hosts",
            &hosts,
            "--commit",
            "QUORUM",
            "--value-size",
            "4",
        ],
    )
    .await;
    let (applied, not_applied, unknown) = (
        raced["cas"]["applied"].as_u64().unwrap(),
        raced["cas"]["not_applied"].as_u64().unwrap(),
        raced["cas"]["unknown"].as_u64().unwrap(),
    );
    let errors: u64 = raced["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(applied + not_applied + errors, 200, "{raced}");
    assert!(
        applied > 0 && not_applied > 0,
        "8 racers on a key both win and lose: {raced}"
    );
    assert!(unknown <= errors, "{raced}");
    assert_eq!(raced["cas"]["commit"], "QUORUM", "{raced}");
    let mut client = cluster.client(0).await;
    let read = client
        .get_serial(pb::GetSerialRequest {
            keyspace: "raced".into(),
            key: b"key0".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let text = String::from_utf8(read.value).unwrap();
    let count: u64 = text.trim_end_matches('.').parse().unwrap();
    assert!(
        (applied..=applied + unknown).contains(&count),
        "the counter reads {count} after {applied} applied and {unknown} unknown: {raced}"
    );

    // Uncontended with fewer keys than workers cannot be: refused.
    let refused = ringstore(
        &cluster,
        &["stress", "cas", "--keys", "2", "--concurrency", "4"],
    )
    .await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--contended"));
    cluster.shutdown().await;
}

/// `ringstore_client_requests_total` of `operation` at `SERIAL` on node `i`.
async fn serial_requests(cluster: &TestCluster, i: usize, operation: &str) -> f64 {
    let page = cluster.metrics(i).await;
    let series = format!(
        "ringstore_client_requests_total{{consistency=\"SERIAL\",operation=\"{operation}\"}}"
    );
    common::processes::sample(&page, &series).unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_sends_a_keys_compare_and_sets_to_its_first_replica_alone() {
    let cluster = TestCluster::start(245, 3, 1).await;
    cluster.create_keyspace(0, KS, 2).await;
    let seeds: Vec<String> = (0..3).map(|i| cluster.address(i).to_string()).collect();
    let client = Client::connect(ClientConfig::new(seeds)).await.unwrap();
    let table = client.routing();
    for k in 0..4 {
        let key = format!("routed{k}").into_bytes();
        let plan = table.plan_for_serial(KS, &key, pb::SerialConsistency::Serial, k);
        let first = (0..3)
            .find(|&i| cluster.address(i) == plan.nodes[0])
            .unwrap();
        let before: Vec<f64> =
            futures::future::join_all((0..3).map(|i| serial_requests(&cluster, i, "put_if"))).await;
        let reads_before = serial_requests(&cluster, first, "get_serial").await;
        for n in 0..10u32 {
            let answer = client
                .put_if(pb::PutIfRequest {
                    keyspace: KS.into(),
                    key: key.clone(),
                    expected: expect::any(),
                    value: n.to_be_bytes().to_vec(),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert!(answer.applied);
        }
        for (i, before) in before.iter().enumerate() {
            let now = serial_requests(&cluster, i, "put_if").await;
            let expected = if i == first { 10.0 } else { 0.0 };
            assert_eq!(
                now - before,
                expected,
                "node {i}, first replica {first}, key {k}"
            );
        }
        let read = client
            .get_serial(pb::GetSerialRequest {
                keyspace: KS.into(),
                key: key.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(read.value, 9u32.to_be_bytes());
        let reads = serial_requests(&cluster, first, "get_serial").await;
        assert_eq!(reads - reads_before, 1.0, "key {k}");
    }
    // Through a pipeline the not-applied mark survives: a missing
    // condition is refused as certainly not applied.
    let pipeline = client.pipeline().await.unwrap();
    let refused = pipeline
        .put_if(pb::PutIfRequest {
            keyspace: KS.into(),
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ClientError::Status { source, .. } if source.metadata().get("x-ringstore-cas").is_some()),
        "{refused}"
    );
    assert!(!refused.is_cas_unknown());
    let answer = pipeline
        .put_if(pb::PutIfRequest {
            keyspace: KS.into(),
            key: b"piped".to_vec(),
            expected: expect::absent(),
            value: b"v".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(answer.applied);
    let read = pipeline
        .get_serial(pb::GetSerialRequest {
            keyspace: KS.into(),
            key: b"piped".to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(read.value, b"v");
    cluster.shutdown().await;
}
