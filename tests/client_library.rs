//! `ringstore-client` against real `ringstore server` processes (blocks 190
//! to 192): token-aware requests are
//! coordinated by a replica of their key (no internode forward, counted by
//! the nodes' `ringstore_coordinator_requests_total{replica_local}`) while
//! round-robin ones are often forwarded; a coordinator SIGKILLed under a
//! concurrent QUORUM load of client-stamped writes and reads surfaces no
//! error and loses no write; a node that joins mid-run gets requests routed
//! to it.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::processes::{Processes, sample};
use futures::StreamExt;
use ringstore_client::{Client, ClientConfig, Routing, ScanSpec, pb};
use ringstore_proto::v1::admin_client::AdminClient;

const QUORUM: i32 = pb::ConsistencyLevel::Quorum as i32;

/// A client of `servers` seeded with nodes `seeds`, refreshing often.
async fn connect(servers: &Processes, seeds: &[usize], routing: Routing) -> Client {
    let mut config = ClientConfig::new(seeds.iter().map(|&i| servers.address(i, 7100)));
    config.routing = routing;
    config.refresh_interval = Duration::from_millis(500);
    config.request_timeout = Duration::from_secs(5);
    Client::connect(config).await.expect("the client connects")
}

/// `ringstore_coordinator_requests_total` of node `i` for `replica_local`,
/// reads and writes together; 0 for a node that does not answer.
/// A failed metrics call is asked again (for at most 10 s), never read as 0:
/// a baseline of 0 would count the node's own earlier requests as the test's.
async fn coordinated(servers: &Processes, i: usize, replica_local: bool) -> u64 {
    let mut admin = AdminClient::new(servers.channel(i, 7100));
    let deadline = Instant::now() + Duration::from_secs(10);
    let page = loop {
        match admin.metrics(pb::MetricsRequest {}).await {
            Ok(page) => break page.into_inner().text,
            Err(status) if Instant::now() < deadline => {
                eprintln!("metrics of node {i}: {status}; asking again");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(status) => panic!("no metrics from node {i}: {status}"),
        }
    };
    ["read", "write"]
        .iter()
        .map(|op| {
            let series = format!(
                "ringstore_coordinator_requests_total{{operation=\"{op}\",replica_local=\"{replica_local}\"}}"
            );
            sample(&page, &series).unwrap_or(0.0) as u64
        })
        .sum()
}

/// Waits (at most 30 s) until nodes `0..n` each list `n` members and all
/// have the same ring checksum. Node 0 showing every node `UN` says nothing
/// of the others: a node whose ring still lacks a member's tokens places
/// keys elsewhere and counts itself no replica of keys it holds.
async fn wait_until_rings_agree(servers: &Processes, n: usize) {
    eventually(
        Duration::from_secs(30),
        "every node has the same ring",
        || async {
            let mut checksums = Vec::new();
            for i in 0..n {
                let mut admin = AdminClient::new(servers.channel(i, 7100));
                match admin.ring(pb::RingRequest {}).await {
                    Ok(ring) if ring.get_ref().nodes.len() == n => {
                        checksums.push(ring.into_inner().ring_checksum)
                    }
                    _ => return false,
                }
            }
            checksums.windows(2).all(|pair| pair[0] == pair[1])
        },
    )
    .await;
}

/// [`coordinated`] summed over nodes `0..n`.
async fn coordinated_by_all(servers: &Processes, n: usize, replica_local: bool) -> u64 {
    let mut total = 0;
    for i in 0..n {
        total += coordinated(servers, i, replica_local).await;
    }
    total
}

fn put(key: &str, value: &str) -> pb::PutRequest {
    pb::PutRequest {
        keyspace: "ks".into(),
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        consistency: QUORUM,
        ..Default::default()
    }
}

fn get(key: &str) -> pb::GetRequest {
    pb::GetRequest {
        keyspace: "ks".into(),
        key: key.as_bytes().to_vec(),
        consistency: QUORUM,
    }
}

/// Polls `check` every 100 ms until it holds, failing after `limit`.
async fn eventually<F: Future<Output = bool>>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn token_aware_requests_are_coordinated_by_a_replica_and_round_robin_ones_are_forwarded() {
    let mut servers = Processes::new(190);
    for i in 0..4 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 4);
    wait_until_rings_agree(&servers, 4).await;
    // RF 2 of 4 nodes: half the nodes are no replica of a given key.
    servers.create_keyspace("ks", "SimpleStrategy:2");

    let client = connect(&servers, &[0], Routing::TokenAware).await;
    let routing = client.routing();
    assert_eq!(routing.nodes().count(), 4);
    assert!(
        routing.ring_matches(),
        "the ring rebuilt is the nodes' ring"
    );
    assert!(routing.knows_keyspace("ks"));
    let (forwarded, local) = (
        coordinated_by_all(&servers, 4, false).await,
        coordinated_by_all(&servers, 4, true).await,
    );
    for i in 0..200 {
        let (key, value) = (format!("a{i}"), format!("value-{i}"));
        client.put(put(&key, &value)).await.expect("put");
        let read = client.get(get(&key)).await.expect("get");
        assert!(read.found && read.value == value.as_bytes(), "{key}");
    }
    let forwarded_token_aware = coordinated_by_all(&servers, 4, false).await - forwarded;
    let local_token_aware = coordinated_by_all(&servers, 4, true).await - local;
    assert_eq!(
        forwarded_token_aware, 0,
        "token-aware requests were coordinated by a node that is no replica"
    );
    assert!(local_token_aware >= 400, "{local_token_aware} local");
    let stats = client.stats();
    assert_eq!(
        (stats.requests, stats.routed_to_replica, stats.retries),
        (400, 400, 0)
    );

    // The CLI's --token-aware sends through the library the same way.
    let forwarded = coordinated_by_all(&servers, 4, false).await;
    for i in 0..10 {
        let key = format!("cli{i}");
        let put = servers.cli(
            0,
            &[
                "put",
                "ks",
                &key,
                "v",
                "--token-aware",
                "--consistency",
                "QUORUM",
            ],
        );
        assert!(
            put.status.success(),
            "{}",
            common::processes::text(&put.stderr)
        );
        let got = servers.cli(
            0,
            &[
                "get",
                "ks",
                &key,
                "--token-aware",
                "--consistency",
                "QUORUM",
            ],
        );
        assert_eq!(common::processes::text(&got.stdout), "v\n");
    }
    assert_eq!(coordinated_by_all(&servers, 4, false).await, forwarded);

    // A scan reads the whole ring, a few ranges at once, in token order.
    let spec = ScanSpec {
        keyspace: "ks".into(),
        consistency: pb::ConsistencyLevel::Quorum,
        page_size: Some(17),
    };
    let rows: Vec<pb::ScanRow> = client
        .scan(spec)
        .map(|row| row.expect("a scanned row"))
        .collect()
        .await;
    assert_eq!(rows.len(), 210);
    assert!(
        rows.windows(2)
            .all(|p| (p[0].token, &p[0].key) < (p[1].token, &p[1].key))
    );
    assert!(
        rows.iter()
            .any(|r| r.key == b"a199" && r.value == b"value-199")
    );

    // The same load round-robin: about half the requests land on a node
    // that is no replica and must forward all of them.
    let round_robin = connect(&servers, &[0], Routing::RoundRobin).await;
    let forwarded = coordinated_by_all(&servers, 4, false).await;
    for i in 0..200 {
        let (key, value) = (format!("a{i}"), format!("again-{i}"));
        round_robin.put(put(&key, &value)).await.expect("put");
        let read = round_robin.get(get(&key)).await.expect("get");
        assert!(read.found && read.value == value.as_bytes(), "{key}");
    }
    let forwarded_round_robin = coordinated_by_all(&servers, 4, false).await - forwarded;
    assert!(
        (100..=300).contains(&forwarded_round_robin),
        "{forwarded_round_robin} of 400 round-robin requests were forwarded"
    );
    servers.kill_all();
}

/// A bounded concurrent load through one client: each task owns its keys
/// (`t{task}-k{j}`) and writes one new version per write (`…-v{n}`, stamped
/// by the client), then reads at QUORUM another of its keys and checks it
/// holds the last version written there. Every error or stale read is kept.
struct Load {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicU64>,
    errors: Arc<Mutex<Vec<String>>>,
    tasks: Vec<tokio::task::JoinHandle<HashMap<String, String>>>,
}

/// Operations (a write and a read) each task does at most.
const MAX_OPS_PER_TASK: u64 = 5_000;

impl Load {
    fn start(client: &Client, tasks: usize, keys: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let tasks = (0..tasks)
            .map(|task| {
                let (client, stop, done, errors) =
                    (client.clone(), stop.clone(), done.clone(), errors.clone());
                tokio::spawn(async move {
                    let mut latest: HashMap<String, String> = HashMap::new();
                    for n in 0..MAX_OPS_PER_TASK {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let key = format!("t{task}-k{}", n as usize % keys);
                        let value = format!("{key}-v{n}");
                        match client.put(put(&key, &value)).await {
                            Ok(_) => {
                                latest.insert(key, value);
                            }
                            Err(error) => {
                                errors.lock().unwrap().push(format!("put {key}: {error}"))
                            }
                        }
                        let key = format!("t{task}-k{}", (n as usize * 7 + 3) % keys);
                        match client.get(get(&key)).await {
                            Ok(read) => {
                                let expected = latest.get(&key).map(String::as_bytes);
                                if expected != read.found.then_some(&read.value[..]) {
                                    errors.lock().unwrap().push(format!(
                                        "get {key}: {:?}, expected {expected:?}",
                                        String::from_utf8_lossy(&read.value)
                                    ));
                                }
                            }
                            Err(error) => {
                                errors.lock().unwrap().push(format!("get {key}: {error}"))
                            }
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    latest
                })
            })
            .collect();
        Load {
            stop,
            done,
            errors,
            tasks,
        }
    }

    fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Waits until `more` operations completed after `from`.
    async fn wait_for(&self, from: u64, more: u64, what: &str) {
        eventually(Duration::from_secs(40), what, || async {
            self.done() >= from + more
        })
        .await;
    }

    /// Stops the tasks; the last value each key acknowledged, and the errors.
    async fn stop(self) -> (HashMap<String, String>, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut latest = HashMap::new();
        for task in self.tasks {
            latest.extend(task.await.expect("a load task panicked"));
        }
        let errors = std::mem::take(&mut *self.errors.lock().unwrap());
        (latest, errors)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_coordinator_killed_mid_run_surfaces_no_error_and_loses_no_write() {
    let mut servers = Processes::new(191);
    for i in 0..3 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 3);
    servers.create_keyspace("ks", "SimpleStrategy:3");

    let client = connect(&servers, &[0, 1], Routing::TokenAware).await;
    let load = Load::start(&client, 4, 25);
    load.wait_for(0, 300, "the load is under way").await;
    // The seed itself goes: the client must learn from the others.
    let at_kill = load.done();
    servers.kill(0);
    load.wait_for(at_kill, 100, "the load goes on after the kill")
        .await;
    // Until the others see it down they still send it replica writes; the
    // load goes on through that window and after.
    let dead = format!("DN  {}", servers.address(0, 7100));
    common::processes::eventually(Duration::from_secs(30), "node 0 is seen down", || {
        servers.status_rows(1).iter().any(|r| r.starts_with(&dead))
    });
    load.wait_for(
        load.done(),
        200,
        "the load goes on once node 0 is seen down",
    )
    .await;
    let (latest, errors) = load.stop().await;
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert_eq!(latest.len(), 100);
    assert!(
        client.stats().retries > 0,
        "no request met the dead node: {:?}",
        client.stats()
    );

    let check = connect(&servers, &[2], Routing::TokenAware).await;
    for (key, value) in &latest {
        let read = check.get(get(key)).await.expect("get");
        assert!(
            read.found && read.value == value.as_bytes(),
            "{key}: {:?}, expected {value}",
            String::from_utf8_lossy(&read.value)
        );
    }
    servers.kill_all();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_that_joins_mid_run_gets_requests_routed_to_it() {
    let mut servers = Processes::new(192);
    for i in 0..3 {
        servers.start(i, &[]);
    }
    servers.wait_until_all_un(0, 3);
    servers.create_keyspace("ks", "SimpleStrategy:2");

    let client = connect(&servers, &[0], Routing::TokenAware).await;
    let load = Load::start(&client, 2, 50);
    load.wait_for(0, 100, "the load is under way").await;
    servers.start(3, &[]);
    // Blocking is fine here: the load runs on the runtime's workers.
    servers.wait_until_all_un(0, 4);
    let at_join = coordinated(&servers, 3, true).await;
    eventually(
        Duration::from_secs(30),
        "requests reach the new node as a replica",
        || async {
            client.routing().nodes().count() == 4
                && coordinated(&servers, 3, true).await >= at_join + 20
        },
    )
    .await;
    let (latest, errors) = load.stop().await;
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert_eq!(latest.len(), 100);
    servers.kill_all();
}
