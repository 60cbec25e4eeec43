//! Write throughput of `Store::apply` over sled: batch (group commit) versus
//! periodic (500 ms) durability, with 64 concurrent writers of 100-byte values.
//!
//! One iteration is a fixed batch of 6,400 writes (100 per writer), timed with
//! `iter_custom` on a multi-thread tokio runtime; criterion reports writes/s as
//! element throughput. Run with `cargo bench -p ringstore-storage --bench durability`.
//!
//! The engine is wrapped to count flushes and their time, and each mode prints
//! how many writes shared a flush on average: the group-commit factor.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use ringstore_storage::{
    Cell, Durability, Engine, KeyspaceId, Result, SledEngine, SledOptions, Store, Timestamp, Tree,
};

const WRITERS: u64 = 64;
const WRITES_PER_WRITER: u64 = 100;
const VALUE_BYTES: usize = 100;

/// sled, counting its flushes and the time they take.
struct FlushCounting {
    sled: SledEngine,
    flushes: AtomicU64,
    flush_nanos: AtomicU64,
}

impl Engine for FlushCounting {
    fn open_tree(&self, name: &str) -> Result<Arc<dyn Tree>> {
        self.sled.open_tree(name)
    }
    fn drop_tree(&self, name: &str) -> Result<bool> {
        self.sled.drop_tree(name)
    }
    fn tree_names(&self) -> Vec<String> {
        self.sled.tree_names()
    }
    fn flush(&self) -> Result<()> {
        let start = Instant::now();
        let outcome = self.sled.flush();
        let nanos = start.elapsed().as_nanos() as u64;
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flush_nanos.fetch_add(nanos, Ordering::Relaxed);
        outcome
    }
    fn size_on_disk(&self) -> Result<u64> {
        self.sled.size_on_disk()
    }
}

/// Runs one batch of `WRITERS * WRITES_PER_WRITER` writes and returns its duration.
async fn write_batch(store: &Store, ks: KeyspaceId, next_key: &AtomicU64) -> Duration {
    let first = next_key.fetch_add(WRITERS * WRITES_PER_WRITER, Ordering::Relaxed);
    let start = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..WRITES_PER_WRITER {
                    let n = first + writer * WRITES_PER_WRITER + i;
                    let key = format!("key-{n:012}");
                    let cell = Cell::live(Timestamp::now(), vec![b'v'; VALUE_BYTES]);
                    store.apply(ks, key.as_bytes(), cell).await.unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    start.elapsed()
}

fn durability(c: &mut Criterion) {
    // One worker per CPU (the default): writers are CPU-bound between flushes.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("apply_64_writers_100B");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(8))
        .throughput(Throughput::Elements(WRITERS * WRITES_PER_WRITER));

    let modes = [
        ("batch", Durability::Batch),
        (
            "periodic_500ms",
            Durability::Periodic {
                interval: Duration::from_millis(500),
            },
        ),
    ];
    for (name, durability) in modes {
        let dir = tempfile::tempdir().unwrap();
        let engine = Arc::new(FlushCounting {
            sled: SledEngine::open(dir.path(), SledOptions::default()).unwrap(),
            flushes: AtomicU64::new(0),
            flush_nanos: AtomicU64::new(0),
        });
        let store = {
            let _runtime = runtime.enter();
            Store::open(engine.clone(), durability).unwrap()
        };
        let ks = KeyspaceId::random();
        let next_key = AtomicU64::new(0);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                runtime.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += write_batch(&store, ks, &next_key).await;
                    }
                    total
                })
            })
        });
        runtime.block_on(store.close()).unwrap();
        let writes = next_key.load(Ordering::Relaxed);
        let flushes = engine.flushes.load(Ordering::Relaxed).max(1);
        let flush_ms = engine.flush_nanos.load(Ordering::Relaxed) as f64 / 1e6;
        eprintln!(
            "{name}: {writes} writes, {flushes} flushes, {:.1} writes/flush, {:.2} ms/flush",
            writes as f64 / flushes as f64,
            flush_ms / flushes as f64,
        );
    }
    group.finish();
}

criterion_group!(benches, durability);
criterion_main!(benches);
