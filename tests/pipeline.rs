//! `Client/Pipeline` through the client library's [`Pipeline`], on three
//! in-process nodes: many tasks share one stream, each request's answer
//! reaches the task that sent it (every value names its key, task and
//! version, so a crossed answer shows), failures come back per request and
//! leave the stream usable, what the pipeline wrote is what unary reads
//! find, and a node stops with a pipeline open. Address blocks 200 and 201.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::TestCluster;
use ringstore_client::{Client, ClientConfig, Pipeline, Routing, pb};

const QUORUM: i32 = pb::ConsistencyLevel::Quorum as i32;
const TASKS: usize = 8;
const OPS_PER_TASK: usize = 150;
const KEYS_PER_TASK: usize = 20;

fn put(key: &str, value: &str) -> pb::PutRequest {
    common::put("ks", key, value, pb::ConsistencyLevel::Quorum)
}

fn get(key: &str) -> pb::GetRequest {
    common::get("ks", key, pb::ConsistencyLevel::Quorum)
}

/// One task's load on the shared pipeline: puts, deletes and reads of its
/// own keys, each read checked against what the task last had acknowledged.
/// Returns each key's last acknowledged value (`None`: deleted) and the
/// mismatches and errors seen.
async fn task_load(
    pipeline: Pipeline,
    task: usize,
) -> (HashMap<String, Option<String>>, Vec<String>) {
    let mut latest: HashMap<String, Option<String>> = HashMap::new();
    let mut problems = Vec::new();
    for n in 0..OPS_PER_TASK {
        let key = format!("t{task}-k{}", n % KEYS_PER_TASK);
        if n % 10 == 9 {
            let delete = pb::DeleteRequest {
                keyspace: "ks".into(),
                key: key.as_bytes().to_vec(),
                consistency: QUORUM,
                timestamp_micros: None,
            };
            match pipeline.delete(delete).await {
                Ok(_) => {
                    latest.insert(key, None);
                }
                Err(error) => problems.push(format!("delete {key}: {error}")),
            }
        } else {
            let value = format!("{key}-v{n}");
            match pipeline.put(put(&key, &value)).await {
                Ok(_) => {
                    latest.insert(key, Some(value));
                }
                Err(error) => problems.push(format!("put {key}: {error}")),
            }
        }
        let read_key = format!("t{task}-k{}", (n * 7 + 3) % KEYS_PER_TASK);
        match pipeline.get(get(&read_key)).await {
            Ok(read) => {
                let expected = latest.get(&read_key).cloned().flatten();
                let found = read
                    .found
                    .then(|| String::from_utf8_lossy(&read.value).into_owned());
                if found != expected {
                    problems.push(format!("get {read_key}: {found:?}, expected {expected:?}"));
                }
            }
            Err(error) => problems.push(format!("get {read_key}: {error}")),
        }
    }
    (latest, problems)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_share_one_pipeline_and_each_gets_its_own_answers() {
    let cluster = TestCluster::start(200, 3, 3).await;
    cluster.create_keyspace(0, "ks", 3).await;
    let mut config = ClientConfig::new([cluster.address(1).to_string()]);
    config.routing = Routing::SeedsOnly;
    config.request_timeout = Duration::from_secs(10);
    let client = Client::connect(config).await.expect("the client connects");
    let pipeline = client.pipeline().await.expect("the pipeline opens");
    assert_eq!(pipeline.node(), cluster.address(1));

    let tasks: Vec<_> = (0..TASKS)
        .map(|task| tokio::spawn(task_load(pipeline.clone(), task)))
        .collect();
    let mut latest = HashMap::new();
    let mut problems = Vec::new();
    for task in tasks {
        let (keys, seen) = task.await.expect("a load task panicked");
        latest.extend(keys);
        problems.extend(seen);
    }
    assert!(
        problems.is_empty(),
        "{} problems, the first: {:?}",
        problems.len(),
        &problems[..problems.len().min(10)]
    );
    assert_eq!(latest.len(), TASKS * KEYS_PER_TASK);

    // Every key, read by unary calls to another coordinator.
    let mut unary = cluster.client(2).await;
    for (key, expected) in &latest {
        let read = unary.get(get(key)).await.expect("a unary get").into_inner();
        let found = read
            .found
            .then(|| String::from_utf8_lossy(&read.value).into_owned());
        assert_eq!(&found, expected, "{key}");
    }

    // Node 1 counted the pipelined requests as requests of their kind.
    let page = cluster.metrics(1).await;
    let puts = page
        .lines()
        .find_map(|line| {
            line.strip_prefix(
                "ringstore_client_requests_total{consistency=\"QUORUM\",operation=\"put\"} ",
            )
        })
        .and_then(|count| count.parse::<f64>().ok());
    let expected_puts = (TASKS * (OPS_PER_TASK - OPS_PER_TASK / 10)) as f64;
    assert!(
        puts.is_some_and(|n| n >= expected_puts),
        "puts counted: {puts:?}, expected at least {expected_puts}"
    );
    let sample = |page: &str, name: &str| common::processes::sample(page, name);
    assert_eq!(sample(&page, "ringstore_client_pipelines_total"), Some(1.0));
    assert_eq!(sample(&page, "ringstore_client_pipelines_open"), Some(1.0));
    // Dropping the last clone ends the stream, and the node sees it closed.
    drop(pipeline);
    common::eventually(Duration::from_secs(10), "the stream is closed", || async {
        let page = cluster.metrics(1).await;
        sample(&page, "ringstore_client_pipelines_open") == Some(0.0)
    })
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_fail_alone_and_the_stream_goes_on() {
    let cluster = TestCluster::start(201, 1, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let mut config = ClientConfig::new([cluster.address(0).to_string()]);
    config.routing = Routing::SeedsOnly;
    let client = Client::connect(config).await.expect("the client connects");
    let pipeline = client.pipeline().await.expect("the pipeline opens");

    let empty_key = pipeline.put(put("", "v")).await.unwrap_err();
    assert_eq!(
        empty_key.code(),
        tonic::Code::InvalidArgument,
        "{empty_key}"
    );
    assert!(
        empty_key.to_string().contains("key must not be empty"),
        "{empty_key}"
    );
    let unknown = pipeline
        .get(pb::GetRequest {
            keyspace: "nope".into(),
            ..get("k")
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound, "{unknown}");
    assert!(unknown.to_string().contains("nope"), "{unknown}");
    let level = pipeline
        .get(pb::GetRequest {
            consistency: 99,
            ..get("k")
        })
        .await
        .unwrap_err();
    assert!(
        level.to_string().contains("unknown consistency level 99"),
        "{level}"
    );
    let huge = pipeline
        .put(put("big", &"x".repeat(16 * 1024 * 1024 + 1)))
        .await
        .unwrap_err();
    assert_eq!(huge.code(), tonic::Code::InvalidArgument, "{huge}");

    // The same stream still serves.
    pipeline.noop().await.expect("a noop after the failures");
    pipeline
        .put(put("k", "after"))
        .await
        .expect("a put after the failures");
    let batch = pipeline
        .batch(pb::BatchRequest {
            keyspace: "ks".into(),
            mutations: vec![
                pb::Mutation {
                    key: b"b1".to_vec(),
                    value: Some(b"one".to_vec()),
                    ..Default::default()
                },
                pb::Mutation {
                    key: Vec::new(),
                    value: Some(b"bad".to_vec()),
                    ..Default::default()
                },
            ],
            consistency: QUORUM,
        })
        .await
        .expect("a batch answers per mutation");
    let codes: Vec<i32> = batch.results.iter().map(|r| r.code).collect();
    assert_eq!(codes, [0, tonic::Code::InvalidArgument as i32]);
    let read = pipeline.get(get("k")).await.expect("a get");
    assert_eq!((read.found, &read.value[..]), (true, &b"after"[..]));
    let read = pipeline.get(get("b1")).await.expect("a get");
    assert_eq!(&read.value[..], b"one");

    // The node stops with the stream still open: it ends the stream (a
    // graceful shutdown waits for every stream), and the pipeline says so.
    tokio::time::timeout(Duration::from_secs(30), cluster.shutdown())
        .await
        .expect("the node stops with a pipeline open");
    let after = pipeline.noop().await.unwrap_err();
    assert_eq!(after.code(), tonic::Code::Unavailable, "{after}");
}
