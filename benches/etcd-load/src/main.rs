//! `etcd-load`: puts or gets against an etcd cluster with a fixed number of
//! requests in flight, keys drawn uniformly from a key space, and values of
//! a fixed size; prints one JSON object with ops/s and latency percentiles
//! (the fields `ringstore stress --json` prints, so `benches/peers.sh` reads
//! both the same way).
//!
//! Each in-flight slot has its own client connection round-robin over the
//! endpoints, as `ringstore stress` spreads its requests; puts are linearizable
//! (etcd's only kind), gets are linearizable unless `--serializable`.
//!
//! `cas` runs compare-and-sets as `ringstore stress cas` does: each is one
//! `Txn` that puts a counter's next value if the key still holds the value
//! the slot last saw (or does not exist yet), else reads the key, whose
//! value the next try expects — one round trip per try, as an application's
//! read-modify-write loop. Uncontended (the default), slot `s` uses only
//! keys `k` with `k mod concurrency == s`; `--contended`, every slot draws
//! from all keys and they race. The report adds applied / not applied.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use etcd_client::{Client, Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse};
use hdrhistogram::Histogram;
use rand::RngExt;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Workload {
    Write,
    Read,
    Cas,
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
    /// `cas`: every slot draws from all keys (else each has keys of its own).
    #[arg(long)]
    contended: bool,
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
    let applied = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut slots = Vec::new();
    for (slot, client) in clients.into_iter().enumerate() {
        let counters = Counters {
            next: Arc::clone(&next),
            errors: Arc::clone(&errors),
            applied: Arc::clone(&applied),
        };
        slots.push(tokio::spawn(run_slot(client, Arc::clone(&args), slot, counters)));
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
        "cas": {
            "applied": applied.load(Ordering::Relaxed),
            "not_applied": match args.workload {
                Workload::Cas => latencies.len() - applied.load(Ordering::Relaxed),
                Workload::Write | Workload::Read => 0,
            },
        },
    });
    println!("{report}");
    Ok(())
}

/// What the slots share.
struct Counters {
    /// The next operation's number.
    next: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
    /// Compare-and-sets that applied.
    applied: Arc<AtomicU64>,
}

/// One in-flight slot: takes operation numbers until `operations` are
/// taken; the latencies (µs) of those that succeeded.
async fn run_slot(
    mut client: Client,
    args: Arc<Args>,
    slot: usize,
    counters: Counters,
) -> Result<Histogram<u64>, hdrhistogram::CreationError> {
    let mut latencies = Histogram::<u64>::new(3)?;
    let value = vec![b'v'; args.value_size];
    let options = args.serializable.then(|| GetOptions::new().with_serializable());
    // `cas`: the value this slot last saw at each key (none: absent).
    let mut seen: std::collections::HashMap<u64, Vec<u8>> = Default::default();
    while counters.next.fetch_add(1, Ordering::Relaxed) < args.operations {
        let mut drawn = rand::rng().random_range(0..args.key_count);
        if matches!(args.workload, Workload::Cas) && !args.contended {
            let slots = args.concurrency as u64;
            drawn = drawn - drawn % slots + slot as u64;
            if drawn >= args.key_count {
                drawn = slot as u64;
            }
        }
        let key = format!("key{drawn}");
        let started = Instant::now();
        let outcome = match args.workload {
            Workload::Write => client.put(key, value.clone(), None).await.map(drop),
            Workload::Read => client.get(key, options.clone()).await.map(drop),
            Workload::Cas => {
                let last = seen.get(&drawn).cloned();
                let count = last.as_deref().map_or(0, count_of);
                let mut next = (count + 1).to_string().into_bytes();
                next.resize(args.value_size.max(next.len()), b'.');
                let guard = match &last {
                    Some(value) => Compare::value(key.clone(), CompareOp::Equal, value.clone()),
                    None => Compare::version(key.clone(), CompareOp::Equal, 0),
                };
                let txn = Txn::new()
                    .when([guard])
                    .and_then([TxnOp::put(key.clone(), next.clone(), None)])
                    .or_else([TxnOp::get(key, None)]);
                client.txn(txn).await.map(|response| {
                    if response.succeeded() {
                        counters.applied.fetch_add(1, Ordering::Relaxed);
                        seen.insert(drawn, next);
                    } else {
                        let current = response.op_responses().into_iter().find_map(|op| match op {
                            TxnOpResponse::Get(get) => {
                                get.kvs().first().map(|kv| kv.value().to_vec())
                            }
                            _ => None,
                        });
                        match current {
                            Some(value) => seen.insert(drawn, value),
                            None => seen.remove(&drawn),
                        };
                    }
                })
            }
        };
        match outcome {
            Ok(()) => {
                let micros = started.elapsed().max(Duration::from_micros(1)).as_micros();
                let _ = latencies.record(micros as u64);
            }
            Err(_) => {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(latencies)
}

/// The count a counter value holds (digits, padded with dots); another
/// value counts as 0.
fn count_of(value: &[u8]) -> u64 {
    let digits: Vec<u8> = value.iter().copied().take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok().and_then(|d| d.parse().ok()).unwrap_or(0)
}
