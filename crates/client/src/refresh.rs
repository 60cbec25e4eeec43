//! Keeping the routing table current: learning the ring and schema from a
//! node, periodically and whenever a failure suggests the cluster changed.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringstore_placement::Datacenter;
use ringstore_proto::v1 as pb;
use tokio::sync::{Notify, watch};

use crate::error::{ClientError, Result};
use crate::pool::Pool;
use crate::routing::RoutingTable;
use crate::topology::Topology;

/// Learns the cluster and publishes each new [`RoutingTable`] whole.
#[derive(Debug)]
pub(crate) struct Refresher {
    pool: Arc<Pool>,
    /// The seeds, resolved; asked when no known node answers.
    seeds: Vec<SocketAddr>,
    local_dc: Option<Datacenter>,
    token_aware: bool,
    timeout: Duration,
    table: watch::Sender<Arc<RoutingTable>>,
    wanted: Notify,
    /// Turns of the round robin over the nodes asked; refreshes counted.
    turn: Mutex<(usize, u64)>,
}

impl Refresher {
    /// Learns the cluster from the first of `seeds` that answers; the
    /// refresher and the first table. Without `local_dc`, the data center of
    /// that seed is the local one.
    pub(crate) async fn start(
        pool: Arc<Pool>,
        seeds: Vec<SocketAddr>,
        local_dc: Option<Datacenter>,
        token_aware: bool,
        timeout: Duration,
    ) -> Result<(Refresher, watch::Receiver<Arc<RoutingTable>>)> {
        let mut last = ClientError::NoNode;
        for &seed in &seeds {
            let learned = async {
                let topology = learn(&pool, seed, timeout).await?;
                let dc = match &local_dc {
                    Some(dc) => dc.clone(),
                    None => datacenter_of(&pool, seed, timeout).await?,
                };
                Ok::<_, ClientError>((topology, dc))
            };
            match learned.await {
                Ok((topology, local_dc)) => {
                    let local_dc = Some(local_dc);
                    let table = RoutingTable::new(&topology, local_dc.clone(), token_aware);
                    let (sender, receiver) = watch::channel(Arc::new(table));
                    let refresher = Refresher {
                        pool,
                        seeds,
                        local_dc,
                        token_aware,
                        timeout,
                        table: sender,
                        wanted: Notify::new(),
                        turn: Mutex::new((0, 1)),
                    };
                    return Ok((refresher, receiver));
                }
                Err(error) => {
                    tracing::debug!(%seed, %error, "seed did not describe the cluster");
                    last = error;
                }
            }
        }
        Err(last)
    }

    /// Asks for a refresh soon (the background task does it).
    pub(crate) fn request(&self) {
        self.wanted.notify_one();
    }

    /// How many tables have been published, the first included.
    pub(crate) fn refreshes(&self) -> u64 {
        self.turn.lock().expect("refresh lock").1
    }

    /// Learns the cluster now from a known node (the up ones first, in
    /// turn), or else a seed, and publishes the table.
    pub(crate) async fn refresh(&self) -> Result<()> {
        let turn = {
            let mut turn = self.turn.lock().expect("refresh lock");
            turn.0 += 1;
            turn.0
        };
        let mut candidates = self.table.borrow().plan_any(turn).nodes;
        let seeds: Vec<SocketAddr> = self
            .seeds
            .iter()
            .filter(|s| !candidates.contains(s))
            .copied()
            .collect();
        candidates.extend(seeds);
        let mut last = ClientError::NoNode;
        for address in candidates {
            match learn(&self.pool, address, self.timeout).await {
                Ok(topology) => {
                    let table =
                        RoutingTable::new(&topology, self.local_dc.clone(), self.token_aware);
                    if !table.ring_matches() {
                        tracing::warn!(
                            %address,
                            "the ring rebuilt from the members differs from the node's; some requests take an extra hop"
                        );
                    }
                    let mut keep: Vec<SocketAddr> = table.nodes().map(|n| n.address).collect();
                    keep.extend(&self.seeds);
                    self.table.send_replace(Arc::new(table));
                    self.pool.retain(&keep);
                    self.turn.lock().expect("refresh lock").1 += 1;
                    return Ok(());
                }
                Err(error) => {
                    tracing::debug!(%address, %error, "node did not describe the cluster");
                    last = error;
                }
            }
        }
        Err(last)
    }
}

/// The background task: refreshes every `interval`, and on request at most
/// every `min_gap`, until aborted (when the last client handle drops).
pub(crate) async fn run(refresher: Arc<Refresher>, interval: Duration, min_gap: Duration) {
    let mut last = Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = refresher.wanted.notified() => {
                tokio::time::sleep(min_gap.saturating_sub(last.elapsed())).await;
            }
        }
        last = Instant::now();
        if let Err(error) = refresher.refresh().await {
            tracing::warn!(%error, "could not learn the cluster from any node; keeping the last view");
        }
    }
}

/// The ring and schema as node `address` knows them.
async fn learn(pool: &Pool, address: SocketAddr, timeout: Duration) -> Result<Topology> {
    let failed = |source| ClientError::Status {
        node: address,
        source,
    };
    let timed_out = |_| ClientError::Timeout {
        node: address,
        timeout,
    };
    let asked = async {
        let ring = pool.admin(address)?.ring(pb::RingRequest {}).await;
        let ring = ring.map_err(failed)?.into_inner();
        let schema = pool
            .schema(address)?
            .list_keyspaces(pb::ListKeyspacesRequest {})
            .await;
        let schema = schema.map_err(failed)?.into_inner();
        Topology::from_pb(ring, schema)
    };
    tokio::time::timeout(timeout, asked)
        .await
        .map_err(timed_out)?
}

/// The data center of node `address`.
async fn datacenter_of(pool: &Pool, address: SocketAddr, timeout: Duration) -> Result<Datacenter> {
    let mut admin = pool.admin(address)?;
    let info = tokio::time::timeout(timeout, admin.info(pb::InfoRequest {}))
        .await
        .map_err(|_| ClientError::Timeout {
            node: address,
            timeout,
        })?
        .map_err(|source| ClientError::Status {
            node: address,
            source,
        })?
        .into_inner();
    Ok(info.datacenter.into())
}
