//! Membership at scale, in the deterministic simulator: how the figures a
//! cluster lives by grow with the number of nodes N, and where they bend.
//!
//! For each N, on a network that loses 1 % of the packets and delays each
//! by 0.1–2 ms, with the default LAN preset (16 random tokens per node,
//! three racks, node 0 the only seed):
//! - **fresh**: all N nodes started at once on empty data, until every
//!   view holds every member up with the same metadata and ring (simulated
//!   seconds); only up to `--fresh-up-to` nodes (default 300), as the
//!   simulator pays every node's n ring rebuilds n times over;
//! - **restart**: all N nodes started at once, each remembering the
//!   others' records as a restarted node does, until the same; the figures
//!   below are measured on this cluster;
//! - **change**: one node's metadata changed (its load), until every member
//!   holds the new version;
//! - **detect**: one node killed, until every other marks it down;
//! - **bytes/s**: what a node sends per second, mean over the nodes, in
//!   the second half of a steady window after the restart (in the first,
//!   SWIM is still passing on the restart's join notices);
//! - **false DN/h**: members declared down while running, counted over all
//!   nodes' views (one node's verdict on one member is one), during a steady
//!   window of `--steady SECONDS` simulated seconds, scaled to an hour;
//! - **wall**: the machine time the simulation of that N took.
//!
//! Everything is simulated time, so the figures do not depend on the
//! machine, except `wall`. Prints a table and writes the curves as an SVG
//! (`target/membership-scale.svg`, or under `CARGO_TARGET_DIR`).
//!
//! ```sh
//! cargo bench -p ringstore-membership --bench scale                    # N = 50 100 200
//! cargo bench -p ringstore-membership --bench scale -- 100 500 1000 --steady 3600 --fresh-up-to 200
//! ```

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{config, lossy_lan, metadata, restarted_cluster};
use plotters::prelude::*;
use ringstore_membership::sim::Simulation;
use ringstore_membership::{Liveness, MembershipEvent};

/// Gives up on a phase after this much simulated time.
const PHASE_LIMIT: Duration = Duration::from_secs(600);

/// One N's figures.
struct Figures {
    nodes: usize,
    /// `None` when not measured (above `--fresh-up-to`) or never converged.
    fresh: Option<Option<Duration>>,
    restart: Option<Duration>,
    change: Option<Duration>,
    detect: Option<Duration>,
    bytes_per_second: f64,
    false_downs_per_hour: f64,
    steady: Duration,
    wall: Duration,
}

/// Down verdicts on members that were running, from `since` on.
fn false_downs(sim: &Simulation, since: Duration, dead: Option<usize>) -> usize {
    let dead = dead.map(|i| sim.nodes()[i].host_id);
    sim.nodes()
        .iter()
        .flat_map(|node| node.events.iter())
        .filter(|(at, event)| {
            *at >= since && matches!(event, MembershipEvent::Down(host) if Some(*host) != dead)
        })
        .count()
}

/// Runs until every view holds every member up with the same metadata and
/// ring; every node started at time zero, so that is when it converged.
/// Prints progress every 5 simulated seconds.
fn until_converged(sim: &mut Simulation, what: &str) -> Option<Duration> {
    let nodes = sim.nodes().len();
    let all: Vec<usize> = (0..nodes).collect();
    while sim.now() < PHASE_LIMIT {
        if sim
            .run_until(Duration::from_secs(5), |s| s.converged(&all))
            .is_some()
        {
            return Some(sim.now());
        }
        // The fewest members any node knows, and sees up.
        let known = (0..nodes).map(|i| sim.view(i).members.len()).min();
        let up = (0..nodes).map(|i| sim.view(i).up_members().count()).min();
        eprintln!(
            "{nodes} nodes, {what}, at {:?}: fewest known {known:?}, fewest up {up:?}",
            sim.now()
        );
    }
    None
}

fn measure(nodes: usize, steady: Duration, fresh_up_to: usize) -> Figures {
    let wall = Instant::now();
    let fresh = (nodes <= fresh_up_to).then(|| {
        let mut sim = Simulation::new(nodes as u64, lossy_lan());
        for i in 0..nodes {
            sim.add_node(config("test", None), metadata(i, 16, "test"));
        }
        until_converged(&mut sim, "fresh start")
    });
    eprintln!(
        "{nodes} nodes: fresh start {fresh:?} simulated, {:.1?} wall",
        wall.elapsed()
    );

    // The other figures on a cluster restarted together: each node knows
    // the others' records, as after a restart, so the simulator is spared
    // the n-fold metadata storm of a fresh start (see
    // `Simulation::add_nodes_remembering`).
    let mut sim = restarted_cluster(nodes, nodes as u64 + 1, lossy_lan(), || {
        config("test", None)
    });
    let restart = until_converged(&mut sim, "restart");
    eprintln!(
        "{nodes} nodes: restart {restart:?} simulated, {:.1?} wall",
        wall.elapsed()
    );

    // A steady window: traffic, and the verdicts reached on live members.
    sim.run_for(Duration::from_secs(5));
    // Traffic over the second half only: in the first, SWIM is still
    // passing on the restart's n join notices, each 4 · log10 n times.
    let steady_from = sim.now();
    sim.run_for(steady / 2);
    let sent_before = sim.bytes_sent();
    sim.run_for(steady - steady / 2);
    let bytes_per_second = (sim.bytes_sent() - sent_before) as f64
        / nodes as f64
        / (steady - steady / 2).as_secs_f64();
    let downs = false_downs(&sim, steady_from, None);
    let false_downs_per_hour = downs as f64 * 3600.0 / steady.as_secs_f64();
    eprintln!(
        "{nodes} nodes: steady {steady:?}: {bytes_per_second:.0} B/s per node, {downs} false DN, {:.1?} wall",
        wall.elapsed()
    );

    // A metadata change, from the last node.
    let changed = nodes - 1;
    let host = sim.nodes()[changed].host_id;
    sim.update_local(changed, |m| m.load_bytes += 1);
    let stamp = sim
        .view(changed)
        .member(host)
        .expect("itself")
        .metadata
        .stamp;
    let change = sim.run_until(PHASE_LIMIT, |s| {
        (0..nodes).all(|i| {
            s.view(i)
                .member(host)
                .is_some_and(|m| m.metadata.stamp == stamp)
        })
    });

    // A node killed (not the seed).
    let victim = nodes / 2;
    sim.kill(victim);
    let detect = sim.run_until(PHASE_LIMIT, |s| s.seen_by_all_as(victim, Liveness::Down));
    Figures {
        nodes,
        fresh,
        restart,
        change,
        detect,
        bytes_per_second,
        false_downs_per_hour,
        steady,
        wall: wall.elapsed(),
    }
}

fn seconds(d: Option<Duration>) -> String {
    d.map_or("never".into(), |d| format!("{:.2}", d.as_secs_f64()))
}

fn print_table(rows: &[Figures]) {
    println!(
        "membership simulation, 1 % loss, 0.1-2 ms, LAN preset, 16 tokens, 3 racks (simulated seconds)"
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>11} {:>8} {:>9}",
        "nodes",
        "fresh s",
        "restart s",
        "change s",
        "detect s",
        "bytes/s",
        "false DN/h",
        "steady s",
        "wall s"
    );
    for f in rows {
        println!(
            "{:>6} {:>9} {:>9} {:>9} {:>9} {:>10.0} {:>11.1} {:>8} {:>9.1}",
            f.nodes,
            f.fresh.map_or("-".into(), seconds),
            seconds(f.restart),
            seconds(f.change),
            seconds(f.detect),
            f.bytes_per_second,
            f.false_downs_per_hour,
            f.steady.as_secs(),
            f.wall.as_secs_f64()
        );
    }
}

/// One figure of a row, `None` where it was not measured.
type Curve = fn(&Figures) -> Option<f64>;

/// The curves, one panel per figure, against N.
fn plot(rows: &[Figures], path: &PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((2, 2));
    let max_n = rows.iter().map(|f| f.nodes).max().unwrap_or(1) as f64;
    let curves: [(&str, Curve); 4] = [
        ("restart to converged (s)", |f| {
            f.restart.map(|d| d.as_secs_f64())
        }),
        ("metadata change reaches all (s)", |f| {
            f.change.map(|d| d.as_secs_f64())
        }),
        ("killed node down everywhere (s)", |f| {
            f.detect.map(|d| d.as_secs_f64())
        }),
        ("KiB sent per node per second", |f| {
            Some(f.bytes_per_second / 1024.0)
        }),
    ];
    for (panel, (title, value)) in panels.iter().zip(curves.iter()) {
        let points: Vec<(f64, f64)> = rows
            .iter()
            .filter_map(|f| value(f).map(|v| (f.nodes as f64, v)))
            .collect();
        let max_y = points.iter().map(|p| p.1).fold(0.0, f64::max).max(1e-3) * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .caption(*title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(0.0..max_n * 1.05, 0.0..max_y)?;
        chart.configure_mesh().x_desc("nodes").draw()?;
        chart.draw_series(LineSeries::new(points.clone(), &BLUE))?;
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, BLUE.filled())))?;
    }
    root.present()?;
    Ok(())
}

fn main() {
    let mut sizes = Vec::new();
    let mut steady = Duration::from_secs(60);
    let mut fresh_up_to = 300;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--steady" => {
                let value = args.next().and_then(|v| v.parse().ok());
                steady = Duration::from_secs(value.expect("--steady takes whole seconds"));
            }
            "--fresh-up-to" => {
                let value = args.next().and_then(|v| v.parse().ok());
                fresh_up_to = value.expect("--fresh-up-to takes a node count");
            }
            // cargo bench passes --bench to every harness-less bench.
            "--bench" => {}
            other => match other.parse() {
                Ok(n) if n >= 3 => sizes.push(n),
                _ => panic!(
                    "unknown argument {other:?}: node counts (3 or more), --steady SECONDS, --fresh-up-to N"
                ),
            },
        }
    }
    if sizes.is_empty() {
        sizes = vec![50, 100, 200];
    }
    let rows: Vec<Figures> = sizes
        .iter()
        .map(|&n| measure(n, steady, fresh_up_to))
        .collect();
    print_table(&rows);
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    let path = target.join("membership-scale.svg");
    match plot(&rows, &path) {
        Ok(()) => println!("curves: {}", path.display()),
        Err(error) => eprintln!("could not write {}: {error}", path.display()),
    }
}
