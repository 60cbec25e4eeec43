//! Writes and reads back a few keys through the token-aware client, then
//! scans the keyspace, and says where the requests went.
//!
//! ```text
//! ringstore server ...                      # a cluster, and then:
//! ringstore keyspace create demo --replication SimpleStrategy:3
//! cargo run -p ringstore-client --example token_aware -- 127.0.0.1:7100 demo
//! ```

use futures::StreamExt;
use ringstore_client::{Client, ClientConfig, ScanSpec, pb};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let seed = args.next().unwrap_or_else(|| "127.0.0.1:7100".into());
    let keyspace = args.next().unwrap_or_else(|| "demo".into());
    let client = Client::connect(ClientConfig::new([seed])).await?;
    let routing = client.routing();
    println!(
        "{} nodes, local data center {}",
        routing.nodes().count(),
        routing.local_dc().map_or("-", |dc| dc.as_str())
    );

    let level = pb::ConsistencyLevel::Quorum;
    for i in 0..10 {
        let key = format!("example{i}").into_bytes();
        let plan = routing.plan_for_key(&keyspace, &key, 0);
        let written = client
            .put(pb::PutRequest {
                keyspace: keyspace.clone(),
                key: key.clone(),
                value: format!("value {i}").into_bytes(),
                consistency: level as i32,
                ..Default::default()
            })
            .await?;
        let read = client
            .get(pb::GetRequest {
                keyspace: keyspace.clone(),
                key,
                consistency: level as i32,
            })
            .await?;
        println!(
            "example{i}: {:?} at {} (first try {}, {} replicas up)",
            String::from_utf8_lossy(&read.value),
            written.timestamp_micros,
            plan.nodes[0],
            plan.replicas
        );
    }

    let spec = ScanSpec {
        keyspace,
        consistency: pb::ConsistencyLevel::One,
        page_size: None,
    };
    let rows = client.scan(spec).count().await;
    println!("scan: {rows} rows; {:?}", client.stats());
    Ok(())
}
