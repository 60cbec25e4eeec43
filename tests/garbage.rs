//! Garbage on every port: bytes that are not HTTP/2, HTTP/2 with garbage
//! frames, truncated and oversized gRPC frames, well-formed gRPC calls whose
//! protobuf bodies are random bytes (for every RPC of every service), and
//! random and oversized gossip datagrams.
//!
//! Afterwards the node must still serve every service, hold exactly the
//! keyspaces and data it held before (garbage stores nothing), and no thread
//! of the process may have panicked (a panicking tokio task is otherwise
//! silent: a panic hook counts them). Every call is bounded by a timeout, so
//! a hang fails the test instead of stalling it.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use common::{TestCluster, get, put};
use prost::Message;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_placement::{Token, TokenRange};
use ringstore_proto::v1 as pb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http;
use tonic::transport::Channel;

/// How long any one call or connection may take to be answered or closed.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// The address block of this file's cluster (127.76.0.x).
const BLOCK: u8 = 76;
/// Random bodies sent to each RPC.
const BODIES_PER_RPC: usize = 12;

static PANICS: AtomicUsize = AtomicUsize::new(0);

/// Counts panics on every thread of the process (the node's tasks included),
/// keeping the default report.
fn count_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
}

/// A codec that sends and receives raw bytes, so a call can carry any body.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }

    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let mut bytes = vec![0; src.remaining()];
        src.copy_to_slice(&mut bytes);
        Ok(Some(bytes))
    }
}

/// Whether `body` fails to decode as the request of the RPC at `path`.
type Undecodable = fn(&[u8]) -> bool;

fn undecodable<M: Message + Default>(body: &[u8]) -> bool {
    M::decode(body).is_err()
}

/// Every RPC served on the client port, with its request type.
fn client_port_rpcs() -> Vec<(&'static str, Undecodable)> {
    vec![
        ("/ringstore.v1.Client/Put", undecodable::<pb::PutRequest>),
        ("/ringstore.v1.Client/Get", undecodable::<pb::GetRequest>),
        (
            "/ringstore.v1.Client/Delete",
            undecodable::<pb::DeleteRequest>,
        ),
        (
            "/ringstore.v1.Client/Batch",
            undecodable::<pb::BatchRequest>,
        ),
        ("/ringstore.v1.Client/Noop", undecodable::<pb::NoopRequest>),
        (
            "/ringstore.v1.Schema/CreateKeyspace",
            undecodable::<pb::CreateKeyspaceRequest>,
        ),
        (
            "/ringstore.v1.Schema/DropKeyspace",
            undecodable::<pb::DropKeyspaceRequest>,
        ),
        (
            "/ringstore.v1.Schema/ListKeyspaces",
            undecodable::<pb::ListKeyspacesRequest>,
        ),
        (
            "/ringstore.v1.Admin/Status",
            undecodable::<pb::StatusRequest>,
        ),
        ("/ringstore.v1.Admin/Ring", undecodable::<pb::RingRequest>),
        ("/ringstore.v1.Admin/Info", undecodable::<pb::InfoRequest>),
        (
            "/ringstore.v1.Admin/DescribeRing",
            undecodable::<pb::DescribeRingRequest>,
        ),
        (
            "/ringstore.v1.Admin/GetEndpoints",
            undecodable::<pb::GetEndpointsRequest>,
        ),
        ("/ringstore.v1.Admin/Hints", undecodable::<pb::HintsRequest>),
        (
            "/ringstore.v1.Admin/SetHandoff",
            undecodable::<pb::SetHandoffRequest>,
        ),
        (
            "/ringstore.v1.Admin/TruncateHints",
            undecodable::<pb::TruncateHintsRequest>,
        ),
        (
            "/ringstore.v1.Admin/Metrics",
            undecodable::<pb::MetricsRequest>,
        ),
        ("/ringstore.v1.Admin/Flush", undecodable::<pb::FlushRequest>),
        (
            "/ringstore.v1.Admin/GossipInfo",
            undecodable::<pb::GossipInfoRequest>,
        ),
        (
            "/ringstore.v1.Admin/SetLoggingLevel",
            undecodable::<pb::SetLoggingLevelRequest>,
        ),
        (
            "/ringstore.v1.Admin/GetLoggingLevels",
            undecodable::<pb::GetLoggingLevelsRequest>,
        ),
        (
            "/ringstore.v1.Admin/TpStats",
            undecodable::<pb::TpStatsRequest>,
        ),
        (
            "/ringstore.v1.Admin/ProxyHistograms",
            undecodable::<pb::ProxyHistogramsRequest>,
        ),
        (
            "/ringstore.v1.Admin/TableStats",
            undecodable::<pb::TableStatsRequest>,
        ),
        ("/ringstore.v1.Admin/Drain", undecodable::<pb::DrainRequest>),
        (
            "/ringstore.v1.Admin/Snapshot",
            undecodable::<pb::SnapshotRequest>,
        ),
        (
            "/ringstore.v1.Admin/ListSnapshots",
            undecodable::<pb::ListSnapshotsRequest>,
        ),
        (
            "/ringstore.v1.Admin/ClearSnapshot",
            undecodable::<pb::ClearSnapshotRequest>,
        ),
        (
            "/ringstore.v1.Admin/RestoreSnapshot",
            undecodable::<pb::RestoreSnapshotRequest>,
        ),
        (
            "/ringstore.v1.Topology/Decommission",
            undecodable::<pb::DecommissionRequest>,
        ),
        (
            "/ringstore.v1.Topology/RemoveNode",
            undecodable::<pb::RemoveNodeRequest>,
        ),
        (
            "/ringstore.v1.Topology/Cleanup",
            undecodable::<pb::CleanupRequest>,
        ),
        (
            "/ringstore.v1.Topology/NetStats",
            undecodable::<pb::NetStatsRequest>,
        ),
        (
            "/ringstore.v1.Topology/SetStreamThroughput",
            undecodable::<pb::SetStreamThroughputRequest>,
        ),
        (
            "/ringstore.v1.Topology/Plan",
            undecodable::<pb::PlanRequest>,
        ),
    ]
}

/// Every RPC served on the internode port, with its request type.
fn internode_port_rpcs() -> Vec<(&'static str, Undecodable)> {
    vec![
        (
            "/ringstore.v1.Internode/Apply",
            undecodable::<pb::ApplyRequest>,
        ),
        (
            "/ringstore.v1.Internode/Read",
            undecodable::<pb::ReadRequest>,
        ),
        (
            "/ringstore.v1.Internode/ReadMany",
            undecodable::<pb::ReadManyRequest>,
        ),
        (
            "/ringstore.v1.Internode/PushSchema",
            undecodable::<pb::SchemaSnapshot>,
        ),
        (
            "/ringstore.v1.Internode/PullSchema",
            undecodable::<pb::PullSchemaRequest>,
        ),
        (
            "/ringstore.v1.Internode/StreamRange",
            undecodable::<pb::StreamRangeRequest>,
        ),
        (
            "/ringstore.v1.Internode/FetchRanges",
            undecodable::<pb::FetchRangesRequest>,
        ),
        (
            "/ringstore.v1.Internode/RangeStats",
            undecodable::<pb::RangeStatsRequest>,
        ),
        (
            "/ringstore.v1.Internode/TakeHints",
            undecodable::<pb::TakeHintsRequest>,
        ),
        (
            "/ringstore.v1.Internode/MetadataSeen",
            undecodable::<pb::MetadataSeenRequest>,
        ),
    ]
}

fn random_bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let len = rng.random_range(1..=max);
    (0..len).map(|_| rng.random::<u8>()).collect()
}

/// `count` random bodies that `undecodable` refuses: truly malformed requests.
fn malformed_bodies(rng: &mut StdRng, undecodable: Undecodable, count: usize) -> Vec<Vec<u8>> {
    let mut bodies = Vec::new();
    while bodies.len() < count {
        let body = random_bytes(rng, 512);
        if undecodable(&body) {
            bodies.push(body);
        }
    }
    bodies
}

fn channel(address: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect_lazy()
}

/// Calls `path` with `body` as its raw protobuf; the status it ends with.
async fn raw_call(channel: &Channel, path: &'static str, body: Vec<u8>) -> tonic::Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    let call = async {
        grpc.ready().await.expect("the channel is ready");
        let path = http::uri::PathAndQuery::from_static(path);
        // A server-streaming call reads unary-style answers too.
        match grpc
            .server_streaming(tonic::Request::new(body), path, RawCodec)
            .await
        {
            Err(status) => status,
            Ok(response) => {
                let mut stream = response.into_inner();
                loop {
                    match stream.message().await {
                        Ok(Some(_)) => continue,
                        Ok(None) => break tonic::Status::ok(""),
                        Err(status) => break status,
                    }
                }
            }
        }
    };
    tokio::time::timeout(ANSWER_WITHIN, call)
        .await
        .unwrap_or_else(|_| panic!("{path} with a garbage body hung"))
}

/// Sends `bytes` on a fresh TCP connection and waits until the server closes
/// it (having answered or not); fails if it is still open after the bound.
async fn send_and_expect_close(address: SocketAddr, bytes: &[u8], what: &str) {
    let mut stream = TcpStream::connect(address).await.expect("connects");
    // The server may close before reading everything: a failed write is fine.
    let _ = stream.write_all(bytes).await;
    let closed = async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            }
        }
    };
    tokio::time::timeout(ANSWER_WITHIN, closed)
        .await
        .unwrap_or_else(|_| panic!("{address}: {what}: the connection stayed open"));
}

/// The status of a gRPC call sent over raw HTTP/2 with `frames` as its body
/// (frames being the gRPC length-prefixed messages, as they are, broken or
/// not), the stream ended after them.
async fn h2_call(address: SocketAddr, path: &str, frames: Bytes) -> Option<Code> {
    let tcp = TcpStream::connect(address).await.expect("connects");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    let connection = tokio::spawn(connection);
    let call = async move {
        let mut client = client.ready().await.ok()?;
        let request = http::Request::post(format!("http://{address}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut send) = client.send_request(request, false).ok()?;
        let _ = send.send_data(frames, true);
        let response = response.await.ok()?;
        let status_of = |headers: &http::HeaderMap| {
            headers
                .get("grpc-status")
                .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
                .map(Code::from)
        };
        if let Some(code) = status_of(response.headers()) {
            return Some(code);
        }
        let mut body = response.into_body();
        while let Some(data) = body.data().await {
            let Ok(data) = data else { return None };
            let _ = body.flow_control().release_capacity(data.len());
        }
        body.trailers().await.ok()?.as_ref().and_then(status_of)
    };
    let code = tokio::time::timeout(ANSWER_WITHIN, call)
        .await
        .unwrap_or_else(|_| panic!("{address}{path}: a broken gRPC frame hung"));
    connection.abort();
    code
}

/// A gRPC message frame: compressed flag, length (BE), message.
fn grpc_frame(flag: u8, claimed_len: u32, message: &[u8]) -> Bytes {
    let mut frame = Vec::with_capacity(5 + message.len());
    frame.put_u8(flag);
    frame.put_u32(claimed_len);
    frame.extend_from_slice(message);
    Bytes::from(frame)
}

/// What garbage must not change: the keyspaces, the data, the hints.
#[derive(Debug, PartialEq)]
struct Stored {
    schema_version: String,
    keyspaces: Vec<String>,
    stored_keyspaces: usize,
    cells: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    hints: usize,
}

async fn stored(cluster: &TestCluster) -> Stored {
    let context = cluster.context(0);
    let schema = context.schema.current();
    let mut keyspaces: Vec<String> = schema.keyspaces().map(|k| k.name.clone()).collect();
    keyspaces.sort();
    let mut cells = Vec::new();
    for id in context.store.stored_keyspaces() {
        let everything = TokenRange::new(Token::MIN, Token::MIN);
        for entry in context.store.scan(id, everything).expect("scans") {
            let (_, key, cell) = entry.expect("a stored cell");
            cells.push((key, cell.value));
        }
    }
    cells.sort();
    Stored {
        schema_version: schema.version().to_string(),
        keyspaces,
        stored_keyspaces: context.store.stored_keyspaces().len(),
        cells,
        hints: context.handoff.pending().len(),
    }
}

/// One call of every service succeeds: none of them lost its task.
async fn every_service_answers(cluster: &TestCluster) {
    let one = pb::ConsistencyLevel::One;
    let answered = async {
        let mut client = cluster.client(0).await;
        client
            .put(put("ks", "after", "fine", one))
            .await
            .expect("put");
        let found = client.get(get("ks", "after", one)).await.expect("get");
        assert_eq!(found.into_inner().value, b"fine");
        cluster
            .schema(0)
            .await
            .list_keyspaces(pb::ListKeyspacesRequest {})
            .await
            .expect("list keyspaces");
        cluster
            .admin(0)
            .await
            .status(pb::StatusRequest::default())
            .await
            .expect("status");
        cluster
            .topology(0)
            .await
            .net_stats(pb::NetStatsRequest::default())
            .await
            .expect("netstats");
        cluster
            .internode(0)
            .await
            .pull_schema(pb::PullSchemaRequest {})
            .await
            .expect("pull schema");
    };
    tokio::time::timeout(ANSWER_WITHIN, answered)
        .await
        .expect("every service answers in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_every_port_gets_an_answer_and_changes_nothing() {
    count_panics();
    let cluster = TestCluster::start(BLOCK, 1, 1).await;
    cluster.create_keyspace(0, "ks", 1).await;
    let mut client = cluster.client(0).await;
    let one = pb::ConsistencyLevel::One;
    client.put(put("ks", "k", "v", one)).await.unwrap();
    let before = stored(&cluster).await;
    let config = cluster.configs[0].clone();
    let ports = [config.listen_address, config.internode_address];
    let mut rng = StdRng::seed_from_u64(76);

    // Not HTTP/2 at all: random bytes, an HTTP/1.1 request, a half preface.
    for address in ports {
        for _ in 0..8 {
            let garbage = random_bytes(&mut rng, 4096);
            send_and_expect_close(address, &garbage, "random bytes").await;
        }
        send_and_expect_close(address, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1").await;
        // A valid preface followed by garbage where the frames should be.
        for _ in 0..8 {
            let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
            bytes.extend(random_bytes(&mut rng, 4096));
            send_and_expect_close(address, &bytes, "a preface and garbage").await;
        }
    }

    // Broken gRPC frames over a sound HTTP/2 stream: each gets a status.
    let broken: Vec<(&str, Bytes)> = vec![
        ("a truncated header", Bytes::from_static(&[0, 0, 0])),
        (
            "a truncated message",
            grpc_frame(0, 100, &[0x0a, 0x02, b'k']),
        ),
        ("a length of 1 GiB", grpc_frame(0, 1 << 30, &[0; 16])),
        ("a length of 4 GiB - 1", grpc_frame(0, u32::MAX, &[])),
        (
            "compressed without an encoding",
            grpc_frame(1, 3, &[1, 2, 3]),
        ),
        ("an unknown flag", grpc_frame(0x80, 0, &[])),
        // (Two whole messages for a unary call are no garbage: tonic serves
        // the first, so they are left out: an empty `Decommission` is valid.)
    ];
    for (address, path) in [
        (ports[0], "/ringstore.v1.Client/Put"),
        (ports[0], "/ringstore.v1.Schema/CreateKeyspace"),
        (ports[0], "/ringstore.v1.Admin/Status"),
        (ports[0], "/ringstore.v1.Topology/Decommission"),
        (ports[1], "/ringstore.v1.Internode/Apply"),
        (ports[1], "/ringstore.v1.Internode/StreamRange"),
        (ports[1], "/ringstore.v1.Internode/TakeHints"),
    ] {
        for (what, frames) in &broken {
            let code = h2_call(address, path, frames.clone()).await;
            assert!(
                code.is_some_and(|code| code != Code::Ok && code != Code::Unknown),
                "{path} with {what}: {code:?}"
            );
        }
    }

    // The metrics endpoint (HTTP/1.1) closes on garbage and answers a
    // request that closes the connection.
    let metrics = config.metrics_bind_address().expect("metrics are on");
    for _ in 0..8 {
        let garbage = random_bytes(&mut rng, 4096);
        send_and_expect_close(metrics, &garbage, "random bytes").await;
    }
    send_and_expect_close(
        metrics,
        b"GET /metrics/../x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1",
    )
    .await;

    // Well-formed calls of every RPC whose bodies are random bytes.
    for (address, rpcs) in [
        (ports[0], client_port_rpcs()),
        (ports[1], internode_port_rpcs()),
    ] {
        let channel = channel(address);
        for (path, undecodable) in rpcs {
            for body in malformed_bodies(&mut rng, undecodable, BODIES_PER_RPC) {
                let status = raw_call(&channel, path, body).await;
                assert_eq!(status.code(), Code::Internal, "{path}: {status:?}");
            }
        }
        let status = raw_call(&channel, "/ringstore.v1.Nope/Nothing", vec![1, 2]).await;
        assert_eq!(status.code(), Code::Unimplemented, "{status:?}");
    }

    // Random and oversized gossip datagrams.
    let socket = UdpSocket::bind("127.76.0.200:0").await.unwrap();
    for _ in 0..200 {
        let datagram = random_bytes(&mut rng, 1500);
        socket
            .send_to(&datagram, config.gossip_address)
            .await
            .unwrap();
    }
    for len in [65_507, 9_000, 1_501] {
        let datagram: Vec<u8> = (0..len).map(|_| rng.random::<u8>()).collect();
        socket
            .send_to(&datagram, config.gossip_address)
            .await
            .unwrap();
    }
    // A header of the right cluster and magic, then garbage.
    let mut looks_right = b"RG\x01\x00".to_vec();
    looks_right.extend(random_bytes(&mut rng, 1400));
    socket
        .send_to(&looks_right, config.gossip_address)
        .await
        .unwrap();

    every_service_answers(&cluster).await;
    let after = stored(&cluster).await;
    let Stored { mut cells, .. } = after;
    cells.retain(|(key, _)| key != b"after");
    assert_eq!(
        Stored { cells, ..after },
        before,
        "garbage changed what the node stores"
    );
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a thread panicked");
    cluster.shutdown().await;
}

/// Found by fuzzing the conversions: a replication factor of `u32::MAX` sized
/// an allocation by it when placing replicas (terabytes: the process aborted,
/// and with the schema gossiped and persisted, every node aborted again on
/// restart), and NTS factors summing past `u32::MAX` overflowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyspace_with_a_replication_factor_of_u32_max_does_not_bring_the_node_down() {
    let cluster = TestCluster::start(77, 1, 1).await;
    cluster.create_keyspace(0, "huge", u32::MAX).await;
    cluster
        .create_nts_keyspace(0, "huge_nts", &[("dc1", u32::MAX), ("dc2", 1)])
        .await;
    let one = pb::ConsistencyLevel::One;
    let answered = async {
        let mut client = cluster.client(0).await;
        for keyspace in ["huge", "huge_nts"] {
            client.put(put(keyspace, "k", "v", one)).await.expect("put");
            let found = client.get(get(keyspace, "k", one)).await.expect("get");
            assert_eq!(found.into_inner().value, b"v");
            let all = client
                .put(put(keyspace, "k", "v", pb::ConsistencyLevel::All))
                .await
                .expect_err("ALL cannot be met");
            assert_eq!(all.code(), Code::Unavailable, "{all:?}");
        }
    };
    tokio::time::timeout(ANSWER_WITHIN, answered)
        .await
        .expect("the node answers in time");
    cluster.shutdown().await;
}
