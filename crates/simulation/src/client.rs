//! The test's side of a run, as a turmoil client host: wait for the
//! cluster, make the keyspace, run the workload, then heal and look:
//! hints delivered, a repair, and every key read from every replica.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use ringstore_history::{FinalKey, NodeId, ReadOutcome, Timestamp, Version};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_proto::v1::internode_client::InternodeClient;
use ringstore_proto::v1::repair_client::RepairClient;
use ringstore_proto::v1::schema_client::SchemaClient;

use crate::net::channel;
use crate::time::SimTime;
use crate::workload::{self, History, KEYSPACE, WorkloadSettings, failure_of, key_name};

/// How long the healing steps may take each, in simulated time.
const HEAL_PATIENCE: Duration = Duration::from_secs(120);

/// What the client host needs to know of the cluster.
#[derive(Clone, Debug)]
pub struct Addresses {
    /// Each node's client address, by node index.
    pub client: Vec<SocketAddr>,
    /// Each node's internode address, by node index.
    pub internode: Vec<SocketAddr>,
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

/// What the client host and the driver share: the driver reads when the
/// load started (the faults' times count from it) and whether it is over;
/// the client leaves its results.
#[derive(Debug, Default)]
pub struct Progress {
    /// When the load started (simulated time).
    pub load_started: Option<Duration>,
    /// Whether the load is over: the driver heals whatever is left.
    pub load_over: bool,
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
    time: SimTime,
    history: History,
    progress: Rc<RefCell<Progress>>,
) -> turmoil::Result {
    let nodes = addresses.client.len();
    let settings_keys = settings.keys;
    wait_until_settled(&addresses, nodes).await?;
    let keyspace_id = create_keyspace(addresses.client[0]).await?;
    let coordinators = addresses
        .client
        .iter()
        .map(|&address| ClientClient::new(channel(address)))
        .collect();
    let started = time.elapsed();
    progress.borrow_mut().load_started = Some(started);
    settings.until = started + load;
    workload::run(settings, coordinators, time.clone(), history).await;
    progress.borrow_mut().load_over = true;

    wait_until_settled(&addresses, nodes).await?;
    wait_until_hints_delivered(&addresses).await?;
    let repair = repair(addresses.client[0]).await?;
    progress.borrow_mut().repair = Some(repair);
    let finals = final_state(&addresses, &keyspace_id, settings_keys).await?;
    progress.borrow_mut().finals = Some(finals);
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

/// Waits until every node sees all `nodes` up and `Normal` on one ring.
async fn wait_until_settled(addresses: &Addresses, nodes: usize) -> turmoil::Result {
    eventually("every node sees every node up and NORMAL", || async {
        let mut checksums = Vec::new();
        for &address in &addresses.client {
            let status = AdminClient::new(channel(address))
                .status(pb::StatusRequest::default())
                .await;
            let Ok(status) = status.map(tonic::Response::into_inner) else {
                return false;
            };
            let settled = status.nodes.len() == nodes
                && status.nodes.iter().all(|n| n.up && n.state == "NORMAL");
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

/// Waits until no node holds a hint.
async fn wait_until_hints_delivered(addresses: &Addresses) -> turmoil::Result {
    eventually("every hint is delivered", || async {
        for &address in &addresses.client {
            let hints = AdminClient::new(channel(address))
                .hints(pb::HintsRequest::default())
                .await;
            match hints.map(tonic::Response::into_inner) {
                Ok(hints) if hints.targets.iter().all(|t| t.hints == 0) => {}
                _ => return false,
            }
        }
        true
    })
    .await
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

/// Every key after healing: each replica's own cell, then a read at `ALL`.
async fn final_state(
    addresses: &Addresses,
    keyspace_id: &str,
    keys: usize,
) -> Result<Vec<FinalKey>, Box<dyn std::error::Error>> {
    let mut admin = AdminClient::new(channel(addresses.client[0]));
    let mut client = ClientClient::new(channel(addresses.client[0]));
    let mut finals = Vec::new();
    for key in (0..keys).map(key_name) {
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
                })
                .await?
                .into_inner()
                .cell;
            let held = cell.and_then(|c| {
                Some(Version {
                    timestamp: Timestamp(c.timestamp_micros),
                    value: c.value?,
                })
            });
            replicas.push((NodeId(node), held));
        }
        let answer = client
            .get(pb::GetRequest {
                keyspace: KEYSPACE.into(),
                key: key.as_bytes().to_vec(),
                consistency: pb::ConsistencyLevel::All as i32,
            })
            .await;
        let read_all = match answer.map(tonic::Response::into_inner) {
            Ok(get) if get.found => ReadOutcome::Found(Version {
                timestamp: Timestamp(get.timestamp_micros),
                value: get.value,
            }),
            Ok(_) => ReadOutcome::NotFound,
            Err(status) => ReadOutcome::Failed(failure_of(&status)),
        };
        finals.push(FinalKey {
            key,
            read_all,
            replicas,
        });
    }
    Ok(finals)
}
