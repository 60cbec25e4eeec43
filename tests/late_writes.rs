//! A write the client was told failed must not overwrite a later
//! acknowledged one (issue 47), on real processes (block 216), and a
//! replica's drop of a write its coordinator stopped waiting for (block
//! 217, in process).
//!
//! Three nodes, RF 3. Node 2 is stopped (SIGSTOP) and a client sends it a
//! write of `old`: the request waits in node 2's socket buffer. The client
//! gives up after its 1 s timeout and writes `new` through node 0 at
//! QUORUM, acknowledged by nodes 0 and 1. Once the old request's deadline
//! and the clock bound have passed, node 2 is continued and reads it. It
//! must refuse it (counted in `ringstore_dropped_expired_total`), not stamp
//! it with its clock of then, which would put `old` above `new`; every
//! QUORUM read through every node, and a read at ALL, then returns `new`.
//!
//! Three kinds of client, as a user would have them: the client library
//! (client timestamps and the send time, by default), the CLI (the same,
//! through the library), and a raw gRPC client that sends only its send
//! time (`x-ringstore-sent-at-micros`) and a gRPC deadline and lets the
//! coordinator stamp the write.
//!
//! On a build without the check (`RINGSTORE_TEST_IGNORE_CLIENT_DEADLINES=true`
//! in the test's environment, which the servers inherit), node 2 stamps the
//! raw client's late write when it reads it, and QUORUM reads return `old`.

mod common;

use std::time::{Duration, Instant};

use common::processes::{Processes, eventually, http_get, sample, text};
use ringstore_client::{Client, ClientConfig, ClientError, RetryPolicy, Routing, pb};
use ringstore_proto::SENT_AT_HEADER;

/// How long every client waits for an answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(1);

/// The nodes' clock bound (`max_clock_offset_ms`): how late after its
/// deadline a write may still be read. Small, to keep the pause short.
const BOUND: Duration = Duration::from_millis(200);

/// The node that is paused.
const PAUSED: usize = 2;

/// Three nodes and keyspace `ks` at RF 3, with `env` besides.
fn cluster(env: &[(&str, &str)]) -> Processes {
    let mut servers = Processes::new(216);
    let bound = BOUND.as_millis().to_string();
    for i in 0..3 {
        let mut settings = vec![("RINGSTORE_MAX_CLOCK_OFFSET_MS", bound.as_str())];
        settings.extend_from_slice(env);
        servers.start(i, &settings);
    }
    servers.wait_until_all_un(0, 3);
    let created = servers.cli(
        0,
        &[
            "keyspace",
            "create",
            "ks",
            "--replication",
            "SimpleStrategy:3",
        ],
    );
    assert!(created.status.success(), "{}", text(&created.stderr));
    eventually(Duration::from_secs(20), "every node knows ks", || {
        (0..3).all(|i| {
            let put = servers.cli(i, &["put", "ks", "warmup", "x", "--consistency", "ALL"]);
            put.status.success()
        })
    });
    servers
}

/// The series `series` of node `i`'s metrics page.
fn metric(servers: &Processes, i: usize, series: &str) -> f64 {
    let (status, page) = http_get(&servers.address(i, 7200), "/metrics");
    assert_eq!(status, 200, "{page}");
    sample(&page, series).unwrap_or(0.0)
}

/// What node 2 has counted so far: writes it coordinated, and writes it
/// refused as read after their client's deadline.
fn counts(servers: &Processes) -> (f64, f64) {
    let series = |local: &str| {
        format!(
            "ringstore_coordinator_requests_total{{operation=\"write\",replica_local=\"{local}\"}}"
        )
    };
    (
        metric(servers, PAUSED, &series("true")) + metric(servers, PAUSED, &series("false")),
        metric(
            servers,
            PAUSED,
            "ringstore_dropped_expired_total{kind=\"client_request\"}",
        ),
    )
}

/// Waits until the clock has passed `sent` plus the client's timeout and
/// the bound, and a little more: the old write is then late by any clock.
fn wait_past_deadline(sent: Instant) {
    let late = sent + CLIENT_TIMEOUT + BOUND + Duration::from_millis(300);
    if let Some(left) = late.checked_duration_since(Instant::now()) {
        std::thread::sleep(left);
    }
}

/// Continues node 2, waits until it has dealt with the late write (refused
/// it, or coordinated it: a count above `before`'s), checks the reads
/// (`new` everywhere), then that it refused the write as late.
fn continue_and_check(servers: &Processes, before: (f64, f64), key: &str, new: &str) {
    servers.signal(PAUSED, "CONT");
    eventually(
        Duration::from_secs(20),
        "node 2 dealt with the write it had in its socket buffer",
        || {
            let now = counts(servers);
            now.0 > before.0 || now.1 > before.1
        },
    );
    check_reads(servers, key, new);
    let (coordinated, refused) = counts(servers);
    assert!(
        refused > before.1 && coordinated == before.0,
        "node 2 coordinated {} writes and refused {} after it went on: it should have \
         refused the late one",
        coordinated - before.0,
        refused - before.1
    );
}

/// Every QUORUM read through every node, and a read at ALL, returns `new`.
/// A read may fail while node 2, just continued, catches up with gossip
/// (its timers all fire at once): it is asked again, within a deadline;
/// every read that answers must answer `new`.
fn check_reads(servers: &Processes, key: &str, new: &str) {
    let read = |node: usize, level: &str, what: &str| {
        let mut answer = None;
        eventually(Duration::from_secs(20), what, || {
            let read = servers.cli(node, &["get", "ks", key, "--consistency", level]);
            if read.status.success() {
                answer = Some(text(&read.stdout).trim().to_string());
            }
            answer.is_some()
        });
        answer.unwrap_or_default()
    };
    for round in 0..3 {
        for node in 0..3 {
            let what = format!("round {round}: a QUORUM read of {key} through node {node}");
            assert_eq!(
                read(node, "QUORUM", &what),
                new,
                "{what} after node 2 went on"
            );
        }
    }
    let what = format!("a read of {key} at ALL through node 2");
    assert_eq!(read(PAUSED, "ALL", &what), new, "{what}");
}

/// Starts a TCP relay to `upstream` on `listen`, as a link that fails just
/// after a request went out: it delivers what a client sends in the first
/// half second of its connection and nothing after (so the cancel and the
/// goodbye a CLI sends at its timeout are lost), and keeps the connection
/// to `upstream` open for as long as the test runs (a connection closed by
/// its client would be torn down by the paused node's first write once it
/// runs again, before it read the request). Runs on a thread and runtime of
/// its own, so the test's blocking waits cannot stall it.
fn start_relay(listen: &str, upstream: &str) {
    let (listen, upstream) = (listen.to_string(), upstream.to_string());
    let (bound, started) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = match tokio::net::TcpListener::bind(&listen).await {
                Ok(listener) => {
                    let _ = bound.send(Ok(()));
                    listener
                }
                Err(error) => {
                    let _ = bound.send(Err(error.to_string()));
                    return;
                }
            };
            let mut held = Vec::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    continue;
                };
                let (mut client_read, mut client_write) = client.into_split();
                let (mut server_read, server_write) = server.into_split();
                let server_write = std::sync::Arc::new(tokio::sync::Mutex::new(server_write));
                // Kept here, so the connection to the node outlives its client.
                held.push(server_write.clone());
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
                });
                let fails = tokio::time::Instant::now() + Duration::from_millis(500);
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut buffer = vec![0u8; 64 * 1024];
                    while let Ok(n) = client_read.read(&mut buffer).await {
                        if n == 0 || tokio::time::Instant::now() >= fails {
                            break;
                        }
                        let mut node = server_write.lock().await;
                        if node.write_all(&buffer[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
    });
    started
        .recv()
        .expect("the relay's thread runs")
        .expect("the relay binds");
}

/// A client library handle whose only node is `node`, never retrying.
async fn library_client(servers: &Processes, node: usize) -> Client {
    let mut config = ClientConfig::new([servers.address(node, 7100)]);
    config.routing = Routing::SeedsOnly;
    config.request_timeout = CLIENT_TIMEOUT;
    config.retry = RetryPolicy {
        max_attempts: std::num::NonZeroU32::MIN,
    };
    Client::connect(config).await.expect("the client connects")
}

fn put(key: &str, value: &str) -> pb::PutRequest {
    pb::PutRequest {
        keyspace: "ks".into(),
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        consistency: pb::ConsistencyLevel::Quorum as i32,
        ..Default::default()
    }
}

/// A read of the key written when the cluster started: made before a node
/// is paused, so the client's connection to it stands.
fn warmup() -> pb::GetRequest {
    pb::GetRequest {
        keyspace: "ks".into(),
        key: b"warmup".to_vec(),
        consistency: pb::ConsistencyLevel::One as i32,
    }
}

fn wall_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_read_after_its_deadline_never_overwrites_a_newer_acknowledged_one() {
    let servers = cluster(&[]);

    // A raw gRPC client: no client timestamp, only its send time and a
    // deadline (which tonic also keeps on the client side).
    let mut raw = servers.client(PAUSED);
    raw.get(warmup())
        .await
        .expect("node 2 answers before it is paused");
    let before = counts(&servers);
    servers.signal(PAUSED, "STOP");
    let sent = Instant::now();
    let mut request = tonic::Request::new(put("raw", "old-raw"));
    request.set_timeout(CLIENT_TIMEOUT);
    request
        .metadata_mut()
        .insert(SENT_AT_HEADER, wall_micros().to_string().parse().unwrap());
    let failed = tokio::time::timeout(CLIENT_TIMEOUT * 3, raw.put(request))
        .await
        .expect("the client's deadline ends the call");
    assert!(failed.is_err(), "the paused node answered: {failed:?}");
    // Given up on; a newer value through node 0, stamped by node 0.
    let mut other = servers.client(0);
    other
        .put(put("raw", "new-raw"))
        .await
        .expect("the newer write is acknowledged at QUORUM by nodes 0 and 1");
    wait_past_deadline(sent);
    continue_and_check(&servers, before, "raw", "new-raw");

    // The client library.
    let stale = library_client(&servers, PAUSED).await;
    let fresh = library_client(&servers, 0).await;
    stale
        .get(warmup())
        .await
        .expect("node 2 answers before it is paused");
    let before = counts(&servers);
    servers.signal(PAUSED, "STOP");
    let sent = Instant::now();
    let failed = stale.put(put("library", "old-library")).await;
    assert!(
        matches!(failed, Err(ClientError::Timeout { .. })),
        "the write to the paused node: {failed:?}"
    );
    fresh
        .put(put("library", "new-library"))
        .await
        .expect("the newer write is acknowledged at QUORUM by nodes 0 and 1");
    wait_past_deadline(sent);
    continue_and_check(&servers, before, "library", "new-library");

    // The CLI, which stamps writes and sends its send time by default,
    // through a relay that fails just after the request went out.
    let relay = format!("127.216.1.{}:7100", PAUSED + 1);
    start_relay(&relay, &servers.address(PAUSED, 7100));
    let before = counts(&servers);
    servers.signal(PAUSED, "STOP");
    let sent = Instant::now();
    let timeout = format!("{}", CLIENT_TIMEOUT.as_secs_f64());
    let failed = servers.cli_at(
        &relay,
        &[
            "--request-timeout",
            &timeout,
            "put",
            "ks",
            "cli",
            "old-cli",
            "--consistency",
            "QUORUM",
        ],
    );
    assert!(
        !failed.status.success(),
        "the CLI's write to the paused node succeeded"
    );
    eprintln!(
        "the CLI's write to the paused node: {}",
        text(&failed.stderr)
    );
    let newer = servers.cli(
        0,
        &["put", "ks", "cli", "new-cli", "--consistency", "QUORUM"],
    );
    assert!(newer.status.success(), "{}", text(&newer.stderr));
    wait_past_deadline(sent);
    continue_and_check(&servers, before, "cli", "new-cli");
}

/// A replica drops a mutation it reads after its coordinator's deadline
/// (allowing the clock bound), unapplied and counted as a dropped
/// `MUTATION` in `tpstats`; it applies one within its deadline and one
/// without (hints, repair). In process, block 217.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_drops_a_write_its_coordinator_stopped_waiting_for() {
    let cluster = common::TestCluster::start(217, 1, 1).await;
    let keyspace = cluster.create_keyspace(0, "ks", 1).await;
    let now = wall_micros();
    let mutation = |key: &str, deadline: Option<i64>| pb::ReplicaMutation {
        keyspace_id: keyspace.clone(),
        key: key.as_bytes().to_vec(),
        cell: Some(pb::Cell {
            timestamp_micros: now,
            expires_at_micros: None,
            value: Some(key.as_bytes().to_vec()),
        }),
        deadline_micros: deadline,
    };
    // The default bound is 500 ms: 2 s late is dropped, 100 ms is not.
    let request = pb::ApplyRequest {
        mutations: vec![
            mutation("late", Some(now - 2_000_000)),
            mutation("barely", Some(now - 100_000)),
            mutation("timely", Some(now + 10_000_000)),
            mutation("hint", None),
        ],
        ring_checksum: 0,
    };
    let response = cluster
        .internode(0)
        .await
        .apply(request)
        .await
        .expect("a late mutation does not fail the others")
        .into_inner();
    let refused: Vec<(u32, pb::RefusalReason)> = response
        .refused
        .iter()
        .map(|r| (r.index, r.reason()))
        .collect();
    assert_eq!(refused, [(0, pb::RefusalReason::Expired)]);
    assert!(
        response.refused[0]
            .message
            .contains("after the coordinator's deadline"),
        "{}",
        response.refused[0].message
    );
    assert_eq!(cluster.local_value(0, "ks", "late"), None);
    for key in ["barely", "timely", "hint"] {
        assert_eq!(
            cluster.local_value(0, "ks", key),
            Some(key.as_bytes().to_vec()),
            "{key}"
        );
    }
    let stats = cluster
        .admin(0)
        .await
        .tp_stats(pb::TpStatsRequest {})
        .await
        .unwrap()
        .into_inner();
    let dropped = |kind: &str| {
        stats
            .dropped
            .iter()
            .find(|d| d.message_type == kind)
            .map(|d| d.dropped)
    };
    assert_eq!(dropped("MUTATION"), Some(1), "{stats:?}");
    assert_eq!(dropped("CLIENT_REQUEST"), Some(0), "{stats:?}");
    cluster.shutdown().await;
}
