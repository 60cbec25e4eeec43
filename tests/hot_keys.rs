//! Hot keys on in-process clusters: read coalescing (block 198), where
//! concurrent QUORUM reads of one hot key share replica rounds, and a read
//! that starts after a write was acknowledged sees it even while rounds of
//! older reads of the key are in flight; and `ringstore toppartitions`
//! (block 57), which names the hottest keys in order.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{TestCluster, get, put};
use ringstore_proto::v1::ConsistencyLevel::{All, One, Quorum};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reads_of_a_hot_key_share_rounds_and_never_miss_an_acknowledged_write() {
    let cluster = TestCluster::start(198, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut writer = cluster.client(0).await;
    writer.put(put("ks", "hot", "v1", All)).await.unwrap();
    let metrics = &cluster.context(0).metrics;
    let before = metrics.coalesced_reads();

    // Readers hammer the key through node 0 until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..32 {
        let mut client = cluster.client(0).await;
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            let mut reads = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let found = client
                    .get(get("ks", "hot", Quorum))
                    .await
                    .unwrap()
                    .into_inner();
                assert!(found.found);
                reads += 1;
            }
            reads
        }));
    }
    // Every round through node 0 while they run; each write acknowledged at
    // QUORUM must be seen by every read that starts after it.
    let mut checker = cluster.client(0).await;
    for version in 2..40 {
        let value = format!("v{version}");
        writer.put(put("ks", "hot", &value, Quorum)).await.unwrap();
        let seen = checker
            .get(get("ks", "hot", Quorum))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            seen.value,
            value.into_bytes(),
            "a read after write {version} missed it"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let mut reads = 0;
    for reader in readers {
        reads += reader.await.unwrap();
    }
    let coalesced = metrics.coalesced_reads() - before;
    eprintln!("{reads} concurrent reads of one key, {coalesced} of them queued for a shared round");
    assert!(coalesced > 0, "no read shared a round");
    cluster.shutdown().await;
}

/// Starts the real `ringstore` binary against node `i` of `cluster`, off
/// the async runtime.
fn spawn_ringstore(
    cluster: &TestCluster,
    i: usize,
    args: &[&str],
) -> tokio::task::JoinHandle<std::process::Output> {
    let host = cluster.address(i).to_string();
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_ringstore"))
            .arg("--host")
            .arg(host)
            .args(args)
            .output()
            .expect("the ringstore binary runs")
    })
}

/// The partition names of one sampler's block of `toppartitions` output
/// (`WRITES` or `READS`), in the order listed.
fn listed(report: &str, sampler: &str) -> Vec<(String, u64)> {
    report
        .split(&format!("{sampler} Sampler:"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {sampler} block in:\n{report}"))
        .lines()
        .skip_while(|line| !line.contains("Partition"))
        .skip(1)
        .take_while(|line| line.starts_with('\t'))
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields[0].to_string(), fields[1].parse().unwrap())
        })
        .collect()
}

/// `ringstore toppartitions` on a node under a skewed load (block 57):
/// rounds of 8 operations on `hot`, 4 on `warm`, 2 on `mild` and one each on
/// 3 keys never used again, written then read. Both samplers must list
/// hot, warm, mild in that order, above every cold key, and the load must
/// have run through the sampling. Then bad requests get errors naming the
/// problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn toppartitions_names_the_hottest_keys_in_order() {
    let cluster = TestCluster::start(57, 1, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let top = spawn_ringstore(
        &cluster,
        0,
        &[
            "toppartitions",
            "ks",
            "--duration",
            "3s",
            "-s",
            "64",
            "-k",
            "5",
        ],
    );
    let mut client = cluster.client(0).await;
    let (mut rounds, deadline) = (0u32, std::time::Instant::now() + Duration::from_secs(60));
    while !top.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "toppartitions never returned"
        );
        let mut keys: Vec<String> = ["hot"; 8].iter().map(|k| k.to_string()).collect();
        keys.extend(["warm"; 4].iter().map(|k| k.to_string()));
        keys.extend(["mild"; 2].iter().map(|k| k.to_string()));
        keys.extend((0..3).map(|c| format!("cold-{rounds}-{c}")));
        for key in &keys {
            let value = format!("{key}@{rounds}");
            client.put(put("ks", key, &value, One)).await.unwrap();
            let found = client.get(get("ks", key, One)).await.unwrap().into_inner();
            assert_eq!(found.value, value.into_bytes());
        }
        rounds += 1;
    }
    let out = top.await.unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{rounds} rounds of load during the sampling:\n{report}");
    assert!(
        rounds >= 5,
        "the load hardly overlapped the sampling: {rounds} rounds"
    );
    for sampler in ["WRITES", "READS"] {
        let listed = listed(&report, sampler);
        let names: Vec<&str> = listed.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names[..3], ["hot", "warm", "mild"], "{sampler}:\n{report}");
        assert!(listed.len() <= 5, "{report}");
        let count = |i: usize| listed[i].1;
        assert!(count(0) > count(1) && count(1) > count(2), "{report}");
        if let Some((cold, n)) = listed.get(3) {
            assert!(*n < count(2), "cold key {cold} counted {n}:\n{report}");
        }
    }

    // Bad requests name what is wrong.
    for (args, expected) in [
        (
            &["toppartitions", "nosuch", "--duration", "10ms"][..],
            "nosuch",
        ),
        (
            &["toppartitions", "ks", "-k", "20", "-s", "10"][..],
            "capacity",
        ),
        (&["toppartitions", "ks", "-s", "5000"][..], "capacity"),
        (
            &["toppartitions", "ks", "--duration", "11m"][..],
            "duration",
        ),
    ] {
        let out = spawn_ringstore(&cluster, 0, args).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    cluster.shutdown().await;
}
