//! Bad requests get a clear gRPC status with a message, never a panic, a
//! hang, or a half-applied write.

mod common;

use common::{TestCluster, get, put};
use ringstore_proto::v1 as pb;
use tonic::Code;

fn assert_status(result: Result<impl std::fmt::Debug, tonic::Status>, code: Code, words: &str) {
    let status = result.expect_err("the request must fail");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(
        status.message().contains(words),
        "message {:?} lacks {words:?}",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_gets_a_clear_status() {
    let mut cluster = TestCluster::start(28, 1, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let mut client = cluster.client(0).await;
    let one = pb::ConsistencyLevel::One;

    assert_status(
        client.put(put("ks", "", "v", one)).await,
        Code::InvalidArgument,
        "key must not be empty",
    );
    assert_status(
        client.get(get("ks", "", one)).await,
        Code::InvalidArgument,
        "key must not be empty",
    );
    let big_key = "k".repeat(64 * 1024 + 1);
    assert_status(
        client.put(put("ks", &big_key, "v", one)).await,
        Code::InvalidArgument,
        "65537 bytes; the limit is 65536",
    );
    let mut big_value = put("ks", "k", "", one);
    big_value.value = vec![0u8; 16 * 1024 * 1024 + 1];
    assert_status(
        client.put(big_value).await,
        Code::InvalidArgument,
        "the limit is 16777216 bytes",
    );
    assert_status(
        client.put(put("nope", "k", "v", one)).await,
        Code::NotFound,
        "keyspace \"nope\" does not exist",
    );
    assert_status(
        client.get(get("nope", "k", one)).await,
        Code::NotFound,
        "does not exist",
    );
    assert_status(
        client.put(put("", "k", "v", one)).await,
        Code::InvalidArgument,
        "keyspace must not be empty",
    );
    let mut bad_level = put("ks", "k", "v", one);
    bad_level.consistency = 99;
    assert_status(
        client.put(bad_level).await,
        Code::InvalidArgument,
        "unknown consistency level 99",
    );
    assert_status(
        client.get(get("ks", "k", pb::ConsistencyLevel::Any)).await,
        Code::InvalidArgument,
        "ANY is only supported for writes",
    );
    let mut negative = put("ks", "k", "v", one);
    negative.timestamp_micros = Some(-5);
    assert_status(
        client.put(negative).await,
        Code::InvalidArgument,
        "negative",
    );
    let mut long_ttl = put("ks", "k", "v", one);
    long_ttl.ttl_seconds = Some(u32::MAX);
    assert_status(
        client.put(long_ttl).await,
        Code::InvalidArgument,
        "exceeds the maximum",
    );
    // More replicas required than exist: RF 3 on a one-node cluster.
    cluster.create_keyspace(0, "wide", 3).await;
    assert_status(
        client
            .put(put("wide", "k", "v", pb::ConsistencyLevel::Quorum))
            .await,
        Code::Unavailable,
        "QUORUM: 2 replicas required, 1 alive",
    );

    // A batch answers each mutation on its own.
    let batch = client
        .batch(pb::BatchRequest {
            keyspace: "ks".into(),
            mutations: vec![
                pb::Mutation {
                    key: b"good".to_vec(),
                    value: Some(b"v".to_vec()),
                    ..Default::default()
                },
                pb::Mutation {
                    key: Vec::new(),
                    value: Some(b"v".to_vec()),
                    ..Default::default()
                },
            ],
            consistency: one as i32,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.results[0].code, 0);
    assert_eq!(batch.results[1].code, Code::InvalidArgument as i32);
    assert!(batch.results[1].message.contains("key must not be empty"));
    assert!(
        client
            .get(get("ks", "good", one))
            .await
            .unwrap()
            .into_inner()
            .found
    );

    let mut schema = cluster.schema(0).await;
    let create = |name: &str, replication: Option<pb::Replication>| pb::CreateKeyspaceRequest {
        name: name.into(),
        replication,
        if_not_exists: false,
        gc_grace_seconds: None,
        speculative_retry: None,
    };
    let simple = |rf| {
        Some(pb::Replication {
            strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                replication_factor: rf,
            })),
        })
    };
    assert_status(
        schema.create_keyspace(create("bad-name", simple(1))).await,
        Code::InvalidArgument,
        "letters, digits and underscores",
    );
    for reserved in ["all", "ALL", "system", "System_x"] {
        assert_status(
            schema.create_keyspace(create(reserved, simple(1))).await,
            Code::InvalidArgument,
            "is reserved",
        );
    }
    assert_status(
        schema.create_keyspace(create("ok", None)).await,
        Code::InvalidArgument,
        "replication is required",
    );
    assert_status(
        schema.create_keyspace(create("ok", simple(0))).await,
        Code::InvalidArgument,
        "replication factor",
    );
    assert_status(
        schema.create_keyspace(create("ks", simple(2))).await,
        Code::AlreadyExists,
        "already exists",
    );
    assert_status(
        schema
            .drop_keyspace(pb::DropKeyspaceRequest {
                name: "nope".into(),
            })
            .await,
        Code::NotFound,
        "does not exist",
    );

    // Malformed internode requests are refused too.
    let mut internode = cluster.internode(0).await;
    assert_status(
        internode
            .read(pb::ReadRequest {
                keyspace_id: "not-a-uuid".into(),
                key: b"k".to_vec(),
                digest_only: false,
                ring_checksum: 0,
            })
            .await,
        Code::InvalidArgument,
        "invalid keyspace id",
    );
    // In a ReadMany, a bad read is refused on its own, with the code a Read
    // of its own gets; a call of too many reads is refused whole.
    let read = |keyspace_id: String, key: &[u8]| pb::ReplicaRead {
        keyspace_id,
        key: key.to_vec(),
        digest_only: false,
    };
    let results = internode
        .read_many(pb::ReadManyRequest {
            reads: vec![
                read("not-a-uuid".into(), b"k"),
                read(uuid_text(), b""),
                read(uuid_text(), b"k"),
            ],
            ring_checksum: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .results;
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0].refused_code, Code::InvalidArgument as i32);
    assert!(
        results[0].refused.contains("invalid keyspace id"),
        "{results:?}"
    );
    assert!(
        results[1].refused.contains("key must not be empty"),
        "{results:?}"
    );
    assert_eq!(
        results[2].refused, "",
        "an unknown keyspace id is read: {results:?}"
    );
    assert_status(
        internode
            .read_many(pb::ReadManyRequest {
                reads: vec![read(uuid_text(), b"k"); 5000],
                ring_checksum: 0,
            })
            .await,
        Code::InvalidArgument,
        "the limit is 1024",
    );
    // A bad mutation is refused on its own, with its reason, not the batch.
    let refused = internode
        .apply(pb::ApplyRequest {
            mutations: vec![pb::ReplicaMutation {
                keyspace_id: uuid_text(),
                key: b"k".to_vec(),
                cell: None,
                deadline_micros: None,
            }],
            ring_checksum: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .refused;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0].reason(), pb::RefusalReason::Invalid);
    assert!(refused[0].message.contains("without a cell"), "{refused:?}");

    // Streaming and topology requests are checked as strictly.
    assert_status(
        internode
            .stream_range(pb::StreamRangeRequest {
                keyspace_id: uuid_text(),
                range: None,
                requester_host_id: String::new(),
                operation: String::new(),
            })
            .await,
        Code::InvalidArgument,
        "token range is required",
    );
    assert_status(
        internode
            .fetch_ranges(pb::FetchRangesRequest {
                operation: "bootstrap".into(),
                ranges: vec![pb::FetchRange {
                    keyspace_id: uuid_text(),
                    range: Some(pb::TokenRangeMessage { start: 1, end: 2 }),
                    sources: vec!["not-a-host".into()],
                }],
            })
            .await,
        Code::InvalidArgument,
        "is not a host id",
    );
    assert_status(
        internode
            .fetch_ranges(pb::FetchRangesRequest {
                operation: String::new(),
                ranges: Vec::new(),
            })
            .await,
        Code::InvalidArgument,
        "is not a stream operation",
    );
    // An operation name also names checkpoints on disk: only the four
    // operations' names are taken.
    assert_status(
        internode
            .fetch_ranges(pb::FetchRangesRequest {
                operation: "decommission:../../etc".into(),
                ranges: Vec::new(),
            })
            .await,
        Code::InvalidArgument,
        "is not a stream operation",
    );
    assert_status(
        internode
            .take_hints(pb::TakeHintsRequest {
                hints: vec![pb::HandedHint {
                    target_host_id: uuid_text(),
                    keyspace_id: uuid_text(),
                    key: Vec::new(),
                    cell: None,
                    created_at_micros: 0,
                }],
            })
            .await,
        Code::InvalidArgument,
        "key must not be empty",
    );
    assert_status(
        internode
            .metadata_seen(pb::MetadataSeenRequest {
                host_id: "nobody".into(),
            })
            .await,
        Code::InvalidArgument,
        "is not a host id",
    );
    let unknown = internode
        .metadata_seen(pb::MetadataSeenRequest {
            host_id: uuid_text(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!unknown.known);
    let mut topology = cluster.topology(0).await;
    assert_status(
        topology
            .remove_node(pb::RemoveNodeRequest {
                host_id: "garbage".into(),
            })
            .await,
        Code::InvalidArgument,
        "is not a host id",
    );
    assert_status(
        topology
            .remove_node(pb::RemoveNodeRequest {
                host_id: uuid_text(),
            })
            .await,
        Code::InvalidArgument,
        "no node",
    );
    assert_status(
        topology.plan(pb::PlanRequest { change: None }).await,
        Code::InvalidArgument,
        "which change",
    );
    assert_status(
        topology
            .plan(pb::PlanRequest {
                change: Some(pb::plan_request::Change::Decommission(uuid_text())),
            })
            .await,
        Code::InvalidArgument,
        "not in the ring",
    );
    assert_status(
        topology
            .cleanup(pb::CleanupRequest {
                keyspace: "nope".into(),
            })
            .await,
        Code::NotFound,
        "does not exist",
    );
    assert_status(
        topology.decommission(pb::DecommissionRequest {}).await,
        Code::FailedPrecondition,
        "replicates to more nodes than would remain",
    );
    assert_status(
        topology
            .set_stream_throughput(pb::SetStreamThroughputRequest {
                mib_per_sec: u64::MAX,
            })
            .await,
        Code::InvalidArgument,
        "beyond any network",
    );

    // A node told to replace something that is not a node gives up and stops.
    let config = ringstore_node::NodeConfig {
        replace_address: Some("not-an-address".into()),
        ..TestCluster::config(28, 1, 1, cluster.dir())
    };
    let replacement = cluster.add(config).await;
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        cluster.nodes[replacement]
            .as_ref()
            .unwrap()
            .stop_requested(),
    )
    .await
    .expect("a replacement with a bad replace_address stops");
    cluster.stop(replacement).await;
    cluster.forget(replacement);

    // The node still serves after all that.
    client.put(put("ks", "after", "fine", one)).await.unwrap();
    assert!(
        client
            .get(get("ks", "after", one))
            .await
            .unwrap()
            .into_inner()
            .found
    );
    cluster.shutdown().await;
}

fn uuid_text() -> String {
    "00000000-0000-4000-8000-000000000001".into()
}
