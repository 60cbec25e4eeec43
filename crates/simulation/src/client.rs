//! The test's side of a run, as a turmoil client host: wait for the
//! cluster, make the keyspace, run the workload (and, in a run that
//! changes the topology, watch a node join and decommission another one
//! meanwhile), then heal and look: hints delivered, a repair, and every
//! key read from every replica.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringstore_history::{FaultWindow, FinalKey, NodeId};
use ringstore_node::platform::Keepalive;
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_proto::v1::internode_client::InternodeClient;
use ringstore_proto::v1::repair_client::RepairClient;
use ringstore_proto::v1::schema_client::SchemaClient;
use ringstore_proto::v1::topology_client::TopologyClient;

use crate::net::{channel, channel_with};
use crate::records::{failure_of, held, key_name, read_outcome};
use crate::time::SimTime;
use crate::workload::{self, History, KEYSPACE, Serving, WorkloadSettings};

/// How long the healing steps may take each, in simulated time.
const HEAL_PATIENCE: Duration = Duration::from_secs(120);

/// What the client host needs to know of the cluster.
#[derive(Clone, Debug)]
pub struct Addresses {
    /// Each node's client address, by node index.
    pub client: Vec<SocketAddr>,
    /// Each node's internode address, by node index.
    pub internode: Vec<SocketAddr>,
    /// The keepalive of the workers' connections (the network's).
    pub keepalive: Keepalive,
}

impl Addresses {
    /// The node whose client address is `endpoint`.
    fn node_of(&self, endpoint: &str) -> Result<usize, String> {
        self.client
            .iter()
            .position(|address| address.to_string() == endpoint)
            .ok_or_else(|| format!("getendpoints named {endpoint}, which is no node"))
    }
}

/// A run's change of topology: a node joins, another is decommissioned.
#[derive(Clone, Copy, Debug)]
pub struct TopologyPlan {
    /// The node that joins (started by the driver at `join_at`).
    pub joiner: usize,
    /// When it is started, since the start of the load.
    pub join_at: Duration,
    /// The node decommissioned.
    pub leaver: usize,
    /// When its decommission starts, since the start of the load.
    pub leave_at: Duration,
}

/// What the client host and the driver share: the driver reads when the
/// load started (the faults' times count from it) and whether it is over;
/// the client leaves its results.
#[derive(Debug, Default)]
pub struct Progress {
    /// When the load started (simulated time).
    pub load_started: Option<Duration>,
    /// Whether the load is over: the driver heals whatever is left.
    pub load_over: bool,
    /// The join and the decommission, as they happened.
    pub topology: Vec<FaultWindow>,
    /// The repair's summary, once run.
    pub repair: Option<String>,
    /// Every key's final state, once read.
    pub finals: Option<Vec<FinalKey>>,
}

/// Everything the client host does, in order.
pub async fn run(
    addresses: Addresses,
    mut settings: WorkloadSettings,
    load: Duration,
    topology: Option<TopologyPlan>,
    time: SimTime,
    history: History,
    progress: Rc<RefCell<Progress>>,
) -> turmoil::Result {
    let nodes = addresses.client.len();
    let settings_keys = settings.keys;
    let mut members: Vec<usize> = (0..nodes)
        .filter(|&node| topology.is_none_or(|plan| node != plan.joiner))
        .collect();
    wait_until_settled(&addresses, &members).await?;
    let keyspace_id = create_keyspace(addresses.client[0]).await?;
    let coordinators = addresses
        .client
        .iter()
        .map(|&address| ClientClient::new(channel_with(address, addresses.keepalive)))
        .collect();
    let serving = Serving::first(nodes, members.len());
    let started = time.elapsed();
    progress.borrow_mut().load_started = Some(started);
    settings.until = started + load;
    let workers = workload::run(
        settings,
        coordinators,
        serving.clone(),
        time.clone(),
        history,
    );
    match topology {
        None => workers.await,
        Some(plan) => {
            let changes = change_topology(&addresses, plan, started, &serving, &time, &progress);
            let (changed, ()) = tokio::join!(changes, workers);
            changed?;
            members.retain(|&node| node != plan.leaver);
            members.push(plan.joiner);
        }
    }
    progress.borrow_mut().load_over = true;

    wait_until_settled(&addresses, &members).await?;
    wait_until_hints_delivered(&addresses, &members).await?;
    let repair = repair(addresses.client[members[0]]).await?;
    progress.borrow_mut().repair = Some(repair);
    let finals = final_state(&addresses, &keyspace_id, settings_keys, &time).await?;
    progress.borrow_mut().finals = Some(finals);
    Ok(())
}

/// Watches the joiner (the driver starts it) until every node sees it
/// `Normal`, then sends it requests; at the plan's time, stops sending
/// requests to the leaver and decommissions it. Records both as windows.
async fn change_topology(
    addresses: &Addresses,
    plan: TopologyPlan,
    started: Duration,
    serving: &Serving,
    time: &SimTime,
    progress: &Rc<RefCell<Progress>>,
) -> turmoil::Result {
    let joined_from = started + plan.join_at;
    let before: Vec<usize> = (0..addresses.client.len())
        .filter(|&node| node != plan.joiner)
        .collect();
    tokio::time::sleep_until(tokio::time::Instant::now() + plan.join_at).await;
    let mut all = before.clone();
    all.push(plan.joiner);
    wait_until_settled(addresses, &all).await?;
    serving.set(plan.joiner, true);
    progress.borrow_mut().topology.push(FaultWindow {
        label: format!("node{} joins (bootstrap)", plan.joiner),
        node: NodeId(plan.joiner),
        from: joined_from,
        until: Some(time.elapsed()),
    });

    let leave_at = started + plan.leave_at;
    let wait = leave_at.saturating_sub(time.elapsed());
    tokio::time::sleep(wait).await;
    serving.set(plan.leaver, false);
    // Requests already sent through it finish first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let from = time.elapsed();
    // A decommission is refused while a node is down (a fault may be under
    // way): it is asked again until it runs.
    let mut topology = TopologyClient::new(channel(addresses.client[plan.leaver]));
    let deadline = tokio::time::Instant::now() + HEAL_PATIENCE;
    while let Err(status) = topology.decommission(pb::DecommissionRequest {}).await {
        if tokio::time::Instant::now() >= deadline {
            return Err(
                format!("node{} could not be decommissioned: {status}", plan.leaver).into(),
            );
        }
        tracing::info!(%status, "decommission refused; asking again in a second");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    progress.borrow_mut().topology.push(FaultWindow {
        label: format!("node{} decommissioned", plan.leaver),
        node: NodeId(plan.leaver),
        from,
        until: Some(time.elapsed()),
    });
    Ok(())
}

/// Polls `check` every 250 ms of simulated time until it holds, failing
/// with `what` after [`HEAL_PATIENCE`].
async fn eventually<F, Fut>(what: &str, mut check: F) -> turmoil::Result
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + HEAL_PATIENCE;
    while !check().await {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out after {HEAL_PATIENCE:?} waiting until {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// Waits until each of `members` sees exactly them up and `Normal` on one
/// ring.
async fn wait_until_settled(addresses: &Addresses, members: &[usize]) -> turmoil::Result {
    eventually("every member sees every member up and NORMAL", || async {
        let mut checksums = Vec::new();
        for &member in members {
            let status = AdminClient::new(channel(addresses.client[member]))
                .status(pb::StatusRequest::default())
                .await;
            let Ok(status) = status.map(tonic::Response::into_inner) else {
                return false;
            };
            let listed = status
                .nodes
                .iter()
                .filter(|n| n.state != "LEFT")
                .filter_map(|n| addresses.node_of(&n.client_address).ok());
            let mut listed: Vec<usize> = listed.collect();
            listed.sort_unstable();
            let mut expected = members.to_vec();
            expected.sort_unstable();
            let settled = listed == expected
                && status
                    .nodes
                    .iter()
                    .filter(|n| n.state != "LEFT")
                    .all(|n| n.up && n.state == "NORMAL");
            if !settled {
                return false;
            }
            checksums.push(status.ring_checksum);
        }
        checksums.windows(2).all(|pair| pair[0] == pair[1])
    })
    .await
}

/// Creates the keyspace at RF 3 through `address`; its id.
async fn create_keyspace(address: SocketAddr) -> Result<String, Box<dyn std::error::Error>> {
    let request = pb::CreateKeyspaceRequest {
        name: KEYSPACE.into(),
        replication: Some(pb::Replication {
            strategy: Some(pb::replication::Strategy::Simple(pb::SimpleStrategy {
                replication_factor: 3,
            })),
        }),
        if_not_exists: true,
        ..Default::default()
    };
    let created = SchemaClient::new(channel(address))
        .create_keyspace(request)
        .await?
        .into_inner();
    Ok(created.keyspace.map(|k| k.id).unwrap_or_default())
}

/// Waits until none of `members` holds a hint; the error names the hints
/// still held.
async fn wait_until_hints_delivered(addresses: &Addresses, members: &[usize]) -> turmoil::Result {
    let held = RefCell::new(String::new());
    let delivered = eventually("every hint is delivered", || async {
        let mut pending = Vec::new();
        for &member in members {
            let hints = AdminClient::new(channel(addresses.client[member]))
                .hints(pb::HintsRequest::default())
                .await;
            match hints.map(tonic::Response::into_inner) {
                Ok(hints) => {
                    pending.extend(hints.targets.iter().filter(|t| t.hints > 0).map(|t| {
                        format!(
                            "node{member} holds {} for {} ({})",
                            t.hints, t.address, t.host_id
                        )
                    }))
                }
                Err(status) => pending.push(format!("node{member}: {status}")),
            }
        }
        *held.borrow_mut() = pending.join("; ");
        pending.is_empty()
    })
    .await;
    delivered.map_err(|error| format!("{error}: {}", held.borrow()).into())
}

/// Repairs the keyspace through `address`; the last progress report.
async fn repair(address: SocketAddr) -> Result<String, Box<dyn std::error::Error>> {
    let request = pb::RepairRequest {
        keyspace: KEYSPACE.into(),
        ..Default::default()
    };
    let mut progress = RepairClient::new(channel(address))
        .repair(request)
        .await?
        .into_inner();
    let mut last = None;
    while let Some(report) = progress.message().await? {
        last = Some(report);
    }
    let last = last.ok_or("the repair sent no progress")?;
    if last.state != "finished" || last.ranges_failed > 0 {
        return Err(format!("the repair did not finish: {last:?}").into());
    }
    Ok(format!(
        "repair: {} ranges, {} mismatched keys, {} rows sent",
        last.ranges_total, last.mismatched_keys, last.rows_sent
    ))
}

/// Every key after healing: each replica's own cell (a tombstone or an
/// expired value included), then a read at `ALL`, timed on the run's clock.
async fn final_state(
    addresses: &Addresses,
    keyspace_id: &str,
    keys: usize,
    time: &SimTime,
) -> Result<Vec<FinalKey>, Box<dyn std::error::Error>> {
    let mut admin = AdminClient::new(channel(addresses.client[0]));
    let mut client = ClientClient::new(channel(addresses.client[0]));
    let mut finals = Vec::new();
    for key in (0..keys).map(key_name) {
        let read_at = time.elapsed();
        let endpoints = admin
            .get_endpoints(pb::GetEndpointsRequest {
                keyspace: KEYSPACE.into(),
                key: key.as_bytes().to_vec(),
            })
            .await?
            .into_inner()
            .endpoints;
        let mut replicas = Vec::new();
        for endpoint in endpoints {
            let node = addresses.node_of(&endpoint)?;
            let cell = InternodeClient::new(channel(addresses.internode[node]))
                .read(pb::ReadRequest {
                    keyspace_id: keyspace_id.into(),
                    key: key.as_bytes().to_vec(),
                    digest_only: false,
                    ring_checksum: 0,
                })
                .await?
                .into_inner()
                .cell;
            replicas.push((NodeId(node), held(cell)));
        }
        let answer = client
            .get(pb::GetRequest {
                keyspace: KEYSPACE.into(),
                key: key.as_bytes().to_vec(),
                consistency: pb::ConsistencyLevel::All as i32,
            })
            .await;
        let answer = answer.map(tonic::Response::into_inner);
        let read_all = read_outcome(answer.map_err(|status| failure_of(&status)));
        finals.push(FinalKey {
            key,
            read_at,
            read_all,
            replicas,
        });
    }
    Ok(finals)
}
