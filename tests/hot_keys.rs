//! Read coalescing on an in-process cluster (block 198): concurrent QUORUM
//! reads of one hot key share replica rounds, and a read that starts after
//! a write was acknowledged sees it even while rounds of older reads of the
//! key are in flight.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{TestCluster, get, put};
use ringstore_proto::v1::ConsistencyLevel::{All, Quorum};

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
