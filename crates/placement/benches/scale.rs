//! Placement at a thousand nodes: a ring grown one host at a time with the
//! balanced allocator, 16 tokens each, measured as it grows.
//!
//! Two layouts, each at RF 3 with NetworkTopologyStrategy:
//! - `1 DC`: `dc1=3` over 3 racks, hosts added round-robin to the racks;
//! - `2 DCs`: `dc1=3, dc2=3`, each over 3 racks, hosts added alternately
//!   to the DCs and round-robin to their racks.
//!
//! At each checkpoint (and for random tokens, the same growth for comparison):
//! - **max/min**: effective ownership, most over least, of the hosts of one
//!   DC (the worst DC); the goal is at most 1.10 at 1,000 hosts;
//! - **join/ideal**: what the last host to join took (its effective
//!   ownership, which is what streams to it) over the mean of its DC's
//!   other hosts, so 1.00 is the ideal 1/(N+1) share;
//! - **alloc ms**: the balanced allocator's time for that last host;
//! - **build ms**: a `Ring` from its members plus the keyspace's
//!   `ReplicaMap`, what every node does on each ring change;
//! - **lookup ns**: the replicas of a random token (mean over 100,000).
//!
//! ```sh
//! cargo bench -p ringstore-placement --bench scale            # to 1,000 hosts
//! cargo bench -p ringstore-placement --bench scale -- 300     # a smaller run
//! ```
//! The 2-DC layout grows to half the count: its allocation costs about six
//! times as much per host at the same count.
//! Exits with status 1 if the 1-DC layout ends above 1.10.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_placement::allocation::{balanced_tokens, random_tokens};
use ringstore_placement::{
    HostId, Location, ReplicaMap, ReplicationStrategy, Ring, RingMember, Token,
};

const NUM_TOKENS: usize = 16;
const GOAL: f64 = 1.10;
const LOOKUPS: usize = 100_000;

#[derive(Clone, Copy, PartialEq)]
enum Tokens {
    Balanced,
    Random,
}

struct Layout {
    name: &'static str,
    strategy: ReplicationStrategy,
    /// Host `n`'s location.
    location: fn(usize) -> Location,
}

fn layouts() -> Vec<Layout> {
    vec![
        Layout {
            name: "1 DC",
            strategy: ReplicationStrategy::network_topology([("dc1", 3)]).expect("valid"),
            location: |n| Location::new("dc1", format!("rack{}", n % 3 + 1)),
        },
        Layout {
            name: "2 DCs",
            strategy: ReplicationStrategy::network_topology([("dc1", 3), ("dc2", 3)])
                .expect("valid"),
            location: |n| {
                Location::new(format!("dc{}", n % 2 + 1), format!("rack{}", n / 2 % 3 + 1))
            },
        },
    ]
}

/// One checkpoint's figures.
struct Row {
    hosts: usize,
    spread: f64,
    join: f64,
    alloc: Duration,
    build: Duration,
    lookup_ns: f64,
}

/// Most over least effective ownership within each DC; the worst DC's.
fn spread(ring: &Ring, owned: &BTreeMap<HostId, f64>) -> f64 {
    let mut per_dc: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for host in ring.hosts() {
        let o = owned.get(&host.id).copied().unwrap_or(0.0);
        let entry = per_dc
            .entry(host.location.dc.to_string())
            .or_insert((f64::MIN, f64::MAX));
        *entry = (entry.0.max(o), entry.1.min(o));
    }
    per_dc
        .values()
        .map(|(max, min)| max / min)
        .fold(0.0, f64::max)
}

/// The last host's ownership over the mean of its DC's others.
fn join_share(ring: &Ring, owned: &BTreeMap<HostId, f64>, last: HostId) -> f64 {
    let dc = &ring.host(last).expect("in the ring").location.dc;
    let others: Vec<f64> = ring
        .hosts()
        .iter()
        .filter(|h| &h.location.dc == dc && h.id != last)
        .map(|h| owned[&h.id])
        .collect();
    owned[&last] / (others.iter().sum::<f64>() / others.len() as f64)
}

fn measure(ring: &Ring, layout: &Layout, last: HostId, alloc: Duration) -> Row {
    let start = Instant::now();
    let rebuilt = Arc::new(Ring::new(ring.epoch(), ring.members()).expect("valid ring"));
    let map = ReplicaMap::new(rebuilt, &layout.strategy);
    let build = start.elapsed();
    let mut rng = StdRng::seed_from_u64(7);
    let tokens: Vec<Token> = (0..LOOKUPS).map(|_| Token(rng.random::<i64>())).collect();
    let start = Instant::now();
    for &token in &tokens {
        black_box(map.replicas(black_box(token)).len());
    }
    let lookup_ns = start.elapsed().as_nanos() as f64 / LOOKUPS as f64;
    let owned = map.effective_ownership();
    Row {
        hosts: ring.hosts().len(),
        spread: spread(ring, &owned),
        join: join_share(ring, &owned, last),
        alloc,
        build,
        lookup_ns,
    }
}

/// Grows `layout` to `hosts` hosts, measuring at each checkpoint.
fn grow(layout: &Layout, hosts: usize, tokens: Tokens, checkpoints: &[usize]) -> Vec<Row> {
    let mut ring = Ring::empty(0);
    let mut rng = StdRng::seed_from_u64(1);
    let mut rows = Vec::new();
    for n in 0..hosts {
        let host = HostId::from_u128(n as u128 + 1);
        let location = (layout.location)(n);
        let start = Instant::now();
        let chosen = match tokens {
            Tokens::Balanced => {
                balanced_tokens(&ring, host, &location, NUM_TOKENS, &layout.strategy)
            }
            Tokens::Random => random_tokens(&ring, NUM_TOKENS, &mut rng),
        }
        .expect("tokens");
        let alloc = start.elapsed();
        ring = ring
            .with_member(n as u64 + 1, RingMember::new(host, location, chosen))
            .expect("no token collides");
        if checkpoints.contains(&(n + 1)) {
            let row = measure(&ring, layout, host, alloc);
            eprintln!(
                "{} {}: {} hosts, max/min {:.3}",
                layout.name,
                if tokens == Tokens::Balanced {
                    "balanced"
                } else {
                    "random"
                },
                row.hosts,
                row.spread
            );
            rows.push(row);
        }
    }
    rows
}

fn main() {
    let hosts: usize = std::env::args()
        .skip(1)
        .find(|a| a != "--bench")
        .map(|a| a.parse().expect("the host count, a number"))
        .unwrap_or(1000);
    let mut failed = false;
    for layout in layouts() {
        // Two DCs cost about six times as much per host (every walk crosses
        // both), so they grow to half as many hosts.
        let hosts = if layout.name == "2 DCs" {
            hosts / 2
        } else {
            hosts
        };
        // Checkpoints where every rack of every DC has as many hosts (racks
        // of unequal size are unequal by construction), then the end.
        let checkpoints: Vec<usize> = [12, 30, 102, 252, 504, 750, 1002, 1500, 2004]
            .into_iter()
            .filter(|&c| c < hosts)
            .chain(std::iter::once(hosts))
            .collect();
        let balanced = grow(&layout, hosts, Tokens::Balanced, &checkpoints);
        let random = grow(&layout, hosts, Tokens::Random, &checkpoints);
        println!(
            "\n{}, RF 3 per DC, 3 racks per DC, {NUM_TOKENS} tokens per host",
            layout.name
        );
        println!(
            "{:>6} {:>9} {:>10} {:>9} {:>9} {:>9} {:>10}",
            "hosts", "max/min", "join/ideal", "alloc ms", "build ms", "lookup ns", "random m/m"
        );
        for (b, r) in balanced.iter().zip(&random) {
            println!(
                "{:>6} {:>9.3} {:>10.3} {:>9.1} {:>9.1} {:>9.0} {:>10.3}",
                b.hosts,
                b.spread,
                b.join,
                b.alloc.as_secs_f64() * 1e3,
                b.build.as_secs_f64() * 1e3,
                b.lookup_ns,
                r.spread
            );
        }
        let last = balanced.last().expect("a checkpoint at the end");
        if layout.name == "1 DC" && last.spread > GOAL {
            println!(
                "FAILED: max/min {:.3} at {} hosts, over {GOAL}",
                last.spread, last.hosts
            );
            failed = true;
        }
    }
    if failed {
        std::process::exit(1);
    }
}
