//! One simulated run from a seed: the cluster, the load, the faults, the
//! healing, and what it recorded.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::rc::Rc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use ringstore_history::linearizable::{self, Budget};
use ringstore_history::{CheckReport, Checks, ClockBound, FaultWindow, FinalKey, Op, check};
use ringstore_node::platform::Keepalive;

use crate::cas::{CasRecord, CasSettings};
use crate::client::{self, Addresses, Progress, TopologyPlan};
use crate::cluster::{NetworkSettings, SimCluster};
use crate::entropy;
use crate::faults::{self, CLOCK_BOUND, Fault, FaultKind};
use crate::workload::{History, WorkloadSettings};

/// What a run does; all of it follows from the seed.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Seeds everything: the network's latencies, the faults, the
    /// workers' draws, and every random number the nodes draw.
    pub seed: u64,
    /// Nodes at the start (RF 3).
    pub nodes: usize,
    /// Whether a node joins during the load and another is decommissioned
    /// (the joiner is one more node).
    pub topology: bool,
    /// Concurrent workers.
    pub clients: usize,
    /// Keys they share.
    pub keys: usize,
    /// The lightweight transactions among their operations, on keys of
    /// their own.
    pub cas: CasSettings,
    /// How long the load runs (simulated).
    pub load: Duration,
    /// The kinds of fault drawn from.
    pub kinds: Vec<FaultKind>,
    /// How a worker waits for an answer.
    pub request_timeout: Duration,
    /// The longest pause of a worker between operations.
    pub think: Duration,
    /// The simulated network.
    pub network: NetworkSettings,
    /// A planted bug, to show the checker catches it: the nodes stamp and
    /// apply client writes read after their client's deadline
    /// (`test_ignore_client_deadlines`).
    pub ignore_client_deadlines: bool,
}

impl Scenario {
    /// The standard run of `seed`: four nodes, six workers on twenty keys
    /// for 30 simulated seconds, faults of every kind; one seed in four
    /// also has a fifth node join and node 1 decommissioned meanwhile. A
    /// share of the operations ([`standard_cas`]) are lightweight
    /// transactions on a few keys of their own.
    pub fn standard(seed: u64) -> Scenario {
        Scenario {
            seed,
            nodes: 4,
            topology: seed % 4 == 3,
            clients: 6,
            keys: 20,
            cas: standard_cas(seed),
            load: Duration::from_secs(30),
            kinds: FaultKind::ALL.to_vec(),
            request_timeout: Duration::from_secs(4),
            think: Duration::from_millis(40),
            network: NetworkSettings::default(),
            ignore_client_deadlines: false,
        }
    }

    /// Paused coordinators: four nodes, six workers on eight keys, only
    /// `Pause` faults (3–7 s each), and a 1 s client timeout, so that most
    /// paused writes are read by their coordinator well after their client
    /// gave up and wrote the key again elsewhere. A paused process does not
    /// run its keepalive timers, but a simulated node whose messages are
    /// held does: connections keep alive for 20 s here, longer than any
    /// pause, so that they survive it, as a stopped process's do, and the
    /// requests held in them are read when it ends.
    pub fn paused_coordinators(seed: u64) -> Scenario {
        let standard = Scenario::standard(seed);
        Scenario {
            topology: false,
            keys: 8,
            cas: CasSettings::NONE,
            kinds: vec![FaultKind::Pause],
            request_timeout: Duration::from_secs(1),
            network: NetworkSettings {
                keepalive: Keepalive {
                    interval: Duration::from_secs(10),
                    timeout: Duration::from_secs(10),
                },
                ..standard.network.clone()
            },
            ..standard
        }
    }
}

/// The CAS load of a standard run, drawn from `seed`: 2 or 3 keys, so
/// that workers racing through different coordinators meet on them, and 15
/// to 25 % of the operations, a modest share: a CAS costs a few round
/// trips more than a plain operation, and the CI seeds' time is bounded.
pub fn standard_cas(seed: u64) -> CasSettings {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6361_735f);
    CasSettings {
        keys: rng.random_range(2..=3),
        share: rng.random_range(150..=250),
    }
}

/// The linearizability checker's budget per CAS key: two million steps,
/// a fraction of a second. A standard run records a few hundred operations
/// per key, each overlapping a few others, which a linearizable history
/// needs well under a tenth of (measured: see the seed tests' result
/// lines, `cas_steps`); refuting one can cost more, but an undecided key
/// fails the run as a refuted one does.
pub const CAS_BUDGET: Budget = Budget::steps(2_000_000);

/// What a run recorded.
#[derive(Debug)]
pub struct Outcome {
    /// The run's scenario.
    pub scenario: Scenario,
    /// Every plain client operation, in invoke order.
    pub history: Vec<Op>,
    /// Every CAS operation, in invoke order.
    pub cas: Vec<CasRecord>,
    /// The faults, as scheduled.
    pub faults: Vec<Fault>,
    /// The faults, in the run's times, as the checker names them.
    pub windows: Vec<FaultWindow>,
    /// The join and the decommission, when the run changed the topology.
    pub topology: Vec<FaultWindow>,
    /// Every key after healing.
    pub finals: Vec<FinalKey>,
    /// The repair's summary.
    pub repair: String,
    /// The history checker's report.
    pub report: CheckReport,
    /// The linearizability checker's report on the CAS operations judged
    /// (within [`CAS_BUDGET`] per key).
    pub linearizability: linearizable::Report,
    /// Simulated time the run took.
    pub simulated: Duration,
    /// Steps it took.
    pub steps: u64,
    /// A hash of the history and the final state: equal for two runs of
    /// one seed when the simulation is deterministic.
    pub digest: u64,
}

/// Runs `scenario` on a thread of its own (see [`entropy`]); the error
/// says why the run could not finish (a node failed, the cluster never
/// settled, the healing timed out).
pub fn run(scenario: &Scenario) -> Result<Outcome, String> {
    entropy::seed(scenario.seed);
    let scenario = scenario.clone();
    std::thread::Builder::new()
        .name(format!("simulation-{}", scenario.seed))
        .spawn(move || simulate(scenario))
        .map_err(|e| format!("cannot start the simulation's thread: {e}"))?
        .join()
        .map_err(|panic| {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_default();
            format!("the simulation panicked: {message}")
        })?
}

/// Where each fault stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    Pending,
    Active,
    Healed,
}

fn simulate(scenario: Scenario) -> Result<Outcome, String> {
    ringstore_storage::offload::run_inline_on_this_thread();
    let plan = topology_plan(&scenario);
    let hosts = scenario.nodes + usize::from(plan.is_some());
    let mut cluster = SimCluster::new(scenario.seed, hosts, &scenario.network);
    for node in &mut cluster.nodes {
        node.config.test_ignore_client_deadlines = scenario.ignore_client_deadlines;
    }
    for i in 0..scenario.nodes {
        cluster.start(i);
    }
    let faultable: Vec<usize> = (0..scenario.nodes)
        .filter(|&node| plan.is_none_or(|plan| node != plan.leaver))
        .collect();
    let faults = faults::schedule(scenario.seed, &scenario.kinds, &faultable, scenario.load);
    let history = History::default();
    let progress = Rc::new(RefCell::new(Progress::default()));
    let addresses = Addresses {
        client: cluster.nodes.iter().map(|n| n.client_address()).collect(),
        internode: cluster
            .nodes
            .iter()
            .map(|n| n.internode_address())
            .collect(),
        keepalive: scenario.network.keepalive,
    };
    let settings = WorkloadSettings {
        clients: scenario.clients,
        keys: scenario.keys,
        request_timeout: scenario.request_timeout,
        think: scenario.think,
        until: Duration::ZERO,
        seed: scenario.seed,
        cas: scenario.cas,
    };
    cluster.add_client(
        "client",
        client::run(
            addresses,
            settings,
            scenario.load,
            plan,
            cluster.time.clone(),
            history.clone(),
            progress.clone(),
        ),
    );

    let mut stages = vec![Stage::Pending; faults.len()];
    let mut steps = 0u64;
    while !cluster.step()? {
        steps += 1;
        let (started, over) = {
            let progress = progress.borrow();
            (progress.load_started, progress.load_over)
        };
        if let Some(started) = started {
            let since = cluster.elapsed().saturating_sub(started);
            drive_faults(&mut cluster, &faults, &mut stages, since, over);
            if let Some(plan) = plan
                && since >= plan.join_at
            {
                cluster.start(plan.joiner);
            }
        }
    }
    let mut progress = progress.borrow_mut();
    let load_started = progress.load_started.ok_or("the load never started")?;
    let windows: Vec<FaultWindow> = faults
        .iter()
        .map(|f| faults::window(f, load_started))
        .collect();
    let finals = progress.finals.take().ok_or("no final state was read")?;
    let topology = std::mem::take(&mut progress.topology);
    let history_of_cas = history.clone();
    let history = history.ops();
    let mut named = windows.clone();
    named.extend(topology.iter().cloned());
    let checks = checks(&scenario, &faults, &windows, &topology);
    let report = check(&history, &finals, &named, &checks);
    let cas = history_of_cas.cas();
    let judged: Vec<_> = cas.iter().filter_map(|r| r.register.clone()).collect();
    let linearizability = linearizable::check(&judged, CAS_BUDGET);
    let digest = digest(&history, &cas, &finals);
    Ok(Outcome {
        scenario,
        history,
        cas,
        faults,
        windows,
        topology,
        finals,
        repair: progress.repair.take().unwrap_or_default(),
        report,
        linearizability,
        simulated: cluster.elapsed(),
        steps,
        digest,
    })
}

/// Applies the faults that are due, keeps the active ones going, heals
/// the ones that are over (all of them once the load is over).
fn drive_faults(
    cluster: &mut SimCluster<'_>,
    faults: &[Fault],
    stages: &mut [Stage],
    since: Duration,
    load_over: bool,
) {
    for (fault, stage) in faults.iter().zip(stages.iter_mut()) {
        let ends = fault.at + fault.length;
        if *stage == Stage::Pending && since >= fault.at && !load_over {
            tracing::info!(%fault, "fault begins");
            faults::apply(cluster, fault);
            *stage = Stage::Active;
        }
        if *stage == Stage::Active {
            if since >= ends || load_over {
                tracing::info!(%fault, "fault healed");
                faults::heal(cluster, fault);
                *stage = Stage::Healed;
            } else {
                faults::during(cluster, fault, since - fault.at);
            }
        }
    }
}

/// The run's join and decommission, drawn from its seed, if it has them:
/// node 1 leaves, the node after the initial ones joins.
fn topology_plan(scenario: &Scenario) -> Option<TopologyPlan> {
    if !scenario.topology {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(scenario.seed ^ 0x746f_706f);
    Some(TopologyPlan {
        joiner: scenario.nodes,
        join_at: Duration::from_millis(rng.random_range(2_000..8_000)),
        leaver: 1,
        leave_at: Duration::from_millis(rng.random_range(12_000..20_000)),
    })
}

/// What the checker checks: RF 3, monotonic reads (but for reads made
/// while ranges moved: see the checker's essay), and the clock bound, which
/// the clock jumps are exempt from; nodes stamp no write after its
/// client's deadline plus `max_clock_offset`, by a clock up to the bound
/// behind.
fn checks(
    scenario: &Scenario,
    faults: &[Fault],
    windows: &[FaultWindow],
    topology: &[FaultWindow],
) -> Checks {
    let exempt = faults
        .iter()
        .zip(windows)
        .filter(|(fault, _)| fault.kind == FaultKind::ClockJump)
        .map(|(_, window)| window.clone())
        .collect();
    Checks {
        replication_factor: 3,
        monotonic_reads: true,
        range_movements: topology.to_vec(),
        // Two nodes may be off in opposite directions, each within the
        // bound: a drifting clock, and a healed jump's timestamps (up to the
        // bound ahead of the majority before the node coordinates again).
        clocks: ClockBound {
            bound: CLOCK_BOUND * 2,
            exempt,
        },
        stamp_deadline: Some(scenario.request_timeout + CLOCK_BOUND * 2),
        write_order: true,
    }
}

/// A hash of everything a run recorded.
fn digest(history: &[Op], cas: &[CasRecord], finals: &[FinalKey]) -> u64 {
    let mut text = String::new();
    for op in history {
        let _ = writeln!(text, "{op:?}");
    }
    for record in cas {
        let _ = writeln!(text, "{record:?}");
    }
    for last in finals {
        let _ = writeln!(text, "{last:?}");
    }
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}
