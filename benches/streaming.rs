//! The stream throttle end to end (not run in CI; `cargo bench --bench
//! streaming`): a real node on loopback holding 80 MiB streams its whole
//! ring to an internode client
//!
//! 1. at 16 MiB/s: the measured rate over the whole stream (≥ 64 MiB);
//! 2. at 8 MiB/s, switched to 32 MiB/s mid-stream with
//!    `SetStreamThroughput`: how long until the rate over a sliding 500 ms
//!    window is within 10% of the new setting;
//! 3. unthrottled: the rate of one stream (the receiver only counts).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ringstore_node::NodeConfig;
use ringstore_node::convert::cell_from_pb;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::internode_client::InternodeClient;
use ringstore_proto::v1::schema_client::SchemaClient;
use ringstore_proto::v1::topology_client::TopologyClient;
use ringstore_storage::{Cell, Timestamp};
use ringstore_streaming::entry_bytes;
use tonic::transport::Channel;

const MIB: f64 = (1 << 20) as f64;
const VALUE_BYTES: usize = 4096;
const KEYS: usize = 20 * 1024; // 80 MiB of values

fn channel(address: SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect_lazy()
}

/// Streams the whole ring; calls `each` with (elapsed, bytes so far) per chunk.
async fn stream_all(
    internode: &mut InternodeClient<Channel>,
    keyspace_id: &str,
    mut each: impl FnMut(Duration, u64),
) -> (Duration, u64) {
    let start = Instant::now();
    let mut stream = internode
        .stream_range(pb::StreamRangeRequest {
            keyspace_id: keyspace_id.to_string(),
            range: Some(pb::TokenRangeMessage { start: 0, end: 0 }),
            requester_host_id: String::new(),
            operation: "bootstrap".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut bytes = 0u64;
    while let Some(chunk) = stream.message().await.unwrap() {
        bytes += chunk
            .entries
            .iter()
            .map(|e| entry_bytes(&e.key, &cell_from_pb(e.cell.clone().unwrap())))
            .sum::<u64>();
        each(start.elapsed(), bytes);
    }
    (start.elapsed(), bytes)
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let ip = [127, 50, 0, 1];
    let config = NodeConfig {
        cluster_name: "bench-streaming".into(),
        data_dir: dir.path().join("node"),
        listen_address: SocketAddr::from((ip, 7100)),
        internode_address: SocketAddr::from((ip, 7101)),
        gossip_address: SocketAddr::from((ip, 7000)),
        seeds: vec![SocketAddr::from((ip, 7000))],
        ring_delay_ms: 100,
        stream_throughput_mib_per_sec: 16,
        ..NodeConfig::default()
    };
    let node = ringstore_node::start(config.clone()).await.unwrap();
    let mut schema = SchemaClient::new(channel(config.listen_address));
    let keyspace = loop {
        let created = schema
            .create_keyspace(pb::CreateKeyspaceRequest {
                name: "bench".into(),
                replication: Some(pb::Replication {
                    strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                        replication_factor: 1,
                    })),
                }),
                if_not_exists: true,
                gc_grace_seconds: None,
                speculative_retry: None,
            })
            .await;
        match created {
            Ok(response) => break response.into_inner().keyspace.unwrap(),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let id = node.context.keyspace("bench").unwrap().id;
    let writes: Vec<_> = (0..KEYS)
        .map(|k| {
            let cell = Cell::live(Timestamp(1), vec![(k % 251) as u8; VALUE_BYTES]);
            (id, format!("key-{k:08}").into_bytes(), cell)
        })
        .collect();
    for batch in writes.chunks(2048) {
        node.context.store.apply_many(batch).await.unwrap();
    }
    let mut internode =
        InternodeClient::new(channel(config.internode_address)).max_decoding_message_size(64 << 20);
    let mut topology = TopologyClient::new(channel(config.listen_address));

    // 1. The steady rate at 16 MiB/s.
    let (elapsed, bytes) = stream_all(&mut internode, &keyspace.id, |_, _| {}).await;
    let rate = bytes as f64 / MIB / elapsed.as_secs_f64();
    println!(
        "steady: {:.1} MiB in {:.2} s = {rate:.2} MiB/s at a 16 MiB/s setting ({:+.1}%)",
        bytes as f64 / MIB,
        elapsed.as_secs_f64(),
        (rate / 16.0 - 1.0) * 100.0
    );

    // 2. 8 MiB/s, switched to 32 MiB/s after 3 s.
    topology
        .set_stream_throughput(pb::SetStreamThroughputRequest { mib_per_sec: 8 })
        .await
        .unwrap();
    let (switch, mut switch_sent) = (tokio::sync::oneshot::channel::<()>(), false);
    let (sender, receiver) = switch;
    let mut changer = topology.clone();
    let change = tokio::spawn(async move {
        let _ = receiver.await;
        let at = Instant::now();
        changer
            .set_stream_throughput(pb::SetStreamThroughputRequest { mib_per_sec: 32 })
            .await
            .unwrap();
        at
    });
    let mut sender = Some(sender);
    let mut samples: Vec<(Duration, u64)> = Vec::new();
    stream_all(&mut internode, &keyspace.id, |at, bytes| {
        samples.push((at, bytes));
        if !switch_sent && at >= Duration::from_secs(3) {
            switch_sent = true;
            let _ = sender.take().unwrap().send(());
        }
    })
    .await;
    let _ = change.await.unwrap();
    let switched = samples
        .iter()
        .find(|(at, _)| *at >= Duration::from_secs(3))
        .map(|(at, _)| *at)
        .unwrap();
    let window = Duration::from_millis(500);
    let before: Vec<f64> = window_rates(&samples, window)
        .into_iter()
        .filter(|(at, _)| *at > Duration::from_secs(1) && *at < switched)
        .map(|(_, r)| r)
        .collect();
    let effective = window_rates(&samples, window)
        .into_iter()
        .find(|(at, rate)| *at >= switched + window && (rate / 32.0 - 1.0).abs() < 0.10)
        .map(|(at, _)| at - switched);
    println!(
        "change: before the switch {:.2} MiB/s (mean of 500 ms windows at an 8 MiB/s setting); \
         32 MiB/s (±10%) over the 500 ms window ending {} after the change",
        before.iter().sum::<f64>() / before.len().max(1) as f64,
        effective.map_or("never".into(), |d| format!("{:.2} s", d.as_secs_f64()))
    );

    // 3. Unthrottled: what one stream does on this machine.
    topology
        .set_stream_throughput(pb::SetStreamThroughputRequest { mib_per_sec: 0 })
        .await
        .unwrap();
    let (elapsed, bytes) = stream_all(&mut internode, &keyspace.id, |_, _| {}).await;
    println!(
        "unthrottled: {:.1} MiB in {:.2} s = {:.1} MiB/s (one stream)",
        bytes as f64 / MIB,
        elapsed.as_secs_f64(),
        bytes as f64 / MIB / elapsed.as_secs_f64()
    );
    node.shutdown().await.unwrap();
}

/// The rate (MiB/s) over the `window` ending at each sample.
fn window_rates(samples: &[(Duration, u64)], window: Duration) -> Vec<(Duration, f64)> {
    samples
        .iter()
        .filter(|(at, _)| *at >= window)
        .map(|&(at, bytes)| {
            let start = samples
                .iter()
                .rev()
                .find(|(t, _)| *t <= at - window)
                .copied()
                .unwrap_or((Duration::ZERO, 0));
            let span = (at - start.0).as_secs_f64();
            (at, (bytes - start.1) as f64 / MIB / span)
        })
        .collect()
}
