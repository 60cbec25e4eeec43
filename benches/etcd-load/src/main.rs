//! `etcd-load`: puts or gets against an etcd cluster with a fixed number of
//! requests in flight, keys drawn uniformly from a key space, and values of
//! a fixed size; prints one JSON object with ops/s and latency percentiles
//! (the fields `ringstore stress --json` prints, so `benches/peers.sh` reads
//! both the same way).
//!
//! Each in-flight slot has its own client connection round-robin over the
//! endpoints, as `ringstore stress` spreads its requests; puts are linearizable
//! (etcd's only kind), gets are linearizable unless `--serializable`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use etcd_client::{Client, GetOptions};
use hdrhistogram::Histogram;
use rand::RngExt;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Workload {
    Write,
    Read,
}

#[derive(Parser, Debug)]
struct Args {
    #[arg(value_enum)]
    workload: Workload,
    /// etcd client endpoints, comma-separated (`http://127.0.0.1:2379,…`).
    #[arg(long, value_delimiter = ',')]
    endpoints: Vec<String>,
    /// Operations in all.
    #[arg(short = 'n', long, default_value_t = 100_000)]
    operations: u64,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Keys are drawn uniformly from this many.
    #[arg(long, default_value_t = 100_000)]
    key_count: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 100)]
    value_size: usize,
    /// Serializable (local, possibly stale) gets instead of linearizable ones.
    #[arg(long)]
    serializable: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Arc::new(Args::parse());
    if args.endpoints.is_empty() {
        return Err("give --endpoints".into());
    }
    let mut clients = Vec::with_capacity(args.concurrency);
    for slot in 0..args.concurrency {
        let endpoint = &args.endpoints[slot % args.endpoints.len()];
        clients.push(Client::connect([endpoint.as_str()], None).await?);
    }
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut slots = Vec::new();
    for client in clients {
        let (args, next, errors) = (Arc::clone(&args), Arc::clone(&next), Arc::clone(&errors));
        slots.push(tokio::spawn(run_slot(client, args, next, errors)));
    }
    let mut latencies = Histogram::<u64>::new(3)?;
    for slot in slots {
        latencies.add(slot.await??)?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let ms = |q: f64| latencies.value_at_quantile(q) as f64 / 1000.0;
    let report = serde_json::json!({
        "workload": format!("{:?}", args.workload).to_lowercase(),
        "operations": latencies.len(),
        "errors": { "any": errors.load(Ordering::Relaxed) },
        "ops_per_second": latencies.len() as f64 / elapsed,
        "latency_ms": { "p50": ms(0.50), "p99": ms(0.99), "p999": ms(0.999) },
    });
    println!("{report}");
    Ok(())
}

/// One in-flight slot: takes operation numbers until `operations` are
/// taken; the latencies (µs) of those that succeeded.
async fn run_slot(
    mut client: Client,
    args: Arc<Args>,
    next: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
) -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    let mut latencies = Histogram::<u64>::new(3)?;
    let value = vec![b'v'; args.value_size];
    let options = args.serializable.then(|| GetOptions::new().with_serializable());
    while next.fetch_add(1, Ordering::Relaxed) < args.operations {
        let key = format!("key{}", rand::rng().random_range(0..args.key_count));
        let started = Instant::now();
        let outcome = match args.workload {
            Workload::Write => client.put(key, value.clone(), None).await.map(drop),
            Workload::Read => client.get(key, options.clone()).await.map(drop),
        };
        match outcome {
            Ok(()) => {
                let micros = started.elapsed().max(Duration::from_micros(1)).as_micros();
                let _ = latencies.record(micros as u64);
            }
            Err(_) => {
                errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(latencies)
}
