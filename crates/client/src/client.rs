//! [`Client`]: the async shell. It owns the connection pool and the routing
//! table's receiver, runs each request along its [`QueryPlan`] under the
//! [`RetryPolicy`], and keeps a background task refreshing the table.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ringstore_proto::v1 as pb;
use ringstore_proto::v1::client_client::ClientClient;
use tokio::sync::watch;

use ringstore_placement::Token;

use crate::config::{ClientConfig, Routing};
use crate::error::{ClientError, Result};
use crate::pool::{Pool, Transport};
use crate::refresh::{self, Refresher};
use crate::retry::{AttemptFailure, Idempotence, RetryDecision};
use crate::routing::{QueryPlan, RoutingTable};
use crate::sent_at::timed;
use crate::timestamps::TimestampGenerator;
use crate::topology::Topology;

/// A connection to a ringstore cluster. Cheap to clone (clones share the
/// pool, the routing table and the refresh task); the refresh task stops
/// when the last clone is dropped.
///
/// ```no_run
/// # async fn example() -> ringstore_client::Result<()> {
/// use ringstore_client::{Client, ClientConfig, pb};
///
/// let client = Client::connect(ClientConfig::new(["127.0.0.1:7100"])).await?;
/// client
///     .put(pb::PutRequest {
///         keyspace: "ks".into(),
///         key: b"user:1".to_vec(),
///         value: b"alice".to_vec(),
///         consistency: pb::ConsistencyLevel::Quorum as i32,
///         ..Default::default()
///     })
///     .await?;
/// let read = client
///     .get(pb::GetRequest {
///         keyspace: "ks".into(),
///         key: b"user:1".to_vec(),
///         consistency: pb::ConsistencyLevel::Quorum as i32,
///     })
///     .await?;
/// assert!(read.found && read.value == b"alice");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: ClientConfig,
    pool: Arc<Pool>,
    /// The seeds, resolved.
    seeds: Vec<SocketAddr>,
    /// The refresher and its background task; none with
    /// [`Routing::SeedsOnly`].
    refreshing: Option<(Arc<Refresher>, AbortOnDrop)>,
    table: watch::Receiver<Arc<RoutingTable>>,
    turn: AtomicUsize,
    timestamps: TimestampGenerator,
    stats: Counters,
    /// Nodes the client failed to reach, and until when they go last.
    /// Held only to read or update, never across an await.
    suspects: Mutex<HashMap<SocketAddr, Instant>>,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    retries: AtomicU64,
    routed_to_replica: AtomicU64,
}

/// What a client has done since it connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientStats {
    /// Requests made (each page of a scan is one), retries not counted.
    pub requests: u64,
    /// Attempts retried on another node.
    pub retries: u64,
    /// Requests whose first node was a replica of their key.
    pub routed_to_replica: u64,
    /// Routing tables learned, the first included.
    pub refreshes: u64,
}

/// Aborts the task when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Client {
    /// Learns the cluster from the first seed that answers and starts
    /// keeping it current. Fails with [`ClientError::NoSeed`] when no seed
    /// answers the ring and schema questions (unreachable, refusing the
    /// credentials, …), holding the last seed's failure.
    pub async fn connect(config: ClientConfig) -> Result<Client> {
        if config.seeds.is_empty() {
            return Err(ClientError::InvalidRequest("no seed address given".into()));
        }
        let mut seeds = Vec::new();
        for seed in &config.seeds {
            seeds.push(resolve(seed).await?);
        }
        let pool = Arc::new(Pool::new(config.clone()));
        if config.routing == Routing::SeedsOnly {
            let empty = Topology {
                nodes: Vec::new(),
                keyspaces: Vec::new(),
                ring_checksum: 0,
            };
            let (_, table) = watch::channel(Arc::new(RoutingTable::new(&empty, None, false)));
            return Ok(Client::with(config, pool, seeds, None, table));
        }
        let started = Refresher::start(
            pool.clone(),
            seeds.clone(),
            config.local_dc.as_deref().map(Into::into),
            config.routing == Routing::TokenAware,
            config.request_timeout,
        )
        .await;
        let (refresher, table) = started.map_err(|error| ClientError::NoSeed {
            seeds: config.seeds.join(", "),
            source: Box::new(error),
        })?;
        let refresher = Arc::new(refresher);
        let task = tokio::spawn(refresh::run(
            refresher.clone(),
            config.refresh_interval,
            config.min_refresh_gap,
        ));
        let refreshing = Some((refresher, AbortOnDrop(task)));
        Ok(Client::with(config, pool, seeds, refreshing, table))
    }

    fn with(
        config: ClientConfig,
        pool: Arc<Pool>,
        seeds: Vec<SocketAddr>,
        refreshing: Option<(Arc<Refresher>, AbortOnDrop)>,
        table: watch::Receiver<Arc<RoutingTable>>,
    ) -> Client {
        Client {
            inner: Arc::new(Inner {
                config,
                pool,
                seeds,
                refreshing,
                table,
                turn: AtomicUsize::new(0),
                timestamps: TimestampGenerator::default(),
                stats: Counters::default(),
                suspects: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The routing table in use (a snapshot: a refresh swaps in a new one).
    pub fn routing(&self) -> Arc<RoutingTable> {
        self.inner.table.borrow().clone()
    }

    /// Learns the ring and schema again now, from a known node or a seed
    /// (nothing to learn with [`Routing::SeedsOnly`]).
    pub async fn refresh(&self) -> Result<()> {
        match &self.inner.refreshing {
            Some((refresher, _)) => refresher.refresh().await,
            None => Ok(()),
        }
    }

    /// Asks the background task for a refresh soon.
    fn want_refresh(&self) {
        if let Some((refresher, _)) = &self.inner.refreshing {
            refresher.request();
        }
    }

    /// What the client has done so far.
    pub fn stats(&self) -> ClientStats {
        let s = &self.inner.stats;
        ClientStats {
            requests: s.requests.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
            routed_to_replica: s.routed_to_replica.load(Ordering::Relaxed),
            refreshes: self
                .inner
                .refreshing
                .as_ref()
                .map_or(0, |(refresher, _)| refresher.refreshes()),
        }
    }

    /// The plan for `key` of `keyspace`, on the next turn of the round
    /// robin; an unknown keyspace asks for a refresh (it may be new).
    pub(crate) fn plan(&self, keyspace: &str, key: &[u8]) -> QueryPlan {
        if self.inner.refreshing.is_none() {
            return self.seeds_plan();
        }
        let table = self.routing();
        if !table.knows_keyspace(keyspace) {
            self.want_refresh();
        }
        table.plan_for_key(keyspace, key, self.next_turn())
    }

    /// The plan of a compare-and-set or serial read of `key` at the wire
    /// serial level `serial`: its one coordinator first
    /// ([`RoutingTable::plan_for_serial`]).
    pub(crate) fn serial_plan(&self, keyspace: &str, key: &[u8], serial: i32) -> QueryPlan {
        if self.inner.refreshing.is_none() {
            return self.seeds_plan();
        }
        let table = self.routing();
        if !table.knows_keyspace(keyspace) {
            self.want_refresh();
        }
        // A level this build does not know: the node refuses it, wherever.
        let serial = pb::SerialConsistency::try_from(serial).unwrap_or_default();
        table.plan_for_serial(keyspace, key, serial, self.next_turn())
    }

    /// The plan for the replicas of `token` (scans).
    pub(crate) fn plan_for_token(&self, keyspace: &str, token: Token) -> QueryPlan {
        if self.inner.refreshing.is_none() {
            return self.seeds_plan();
        }
        self.routing()
            .plan_for_token(keyspace, token, self.next_turn())
    }

    /// The plan of a request for any node.
    fn plan_any(&self) -> QueryPlan {
        if self.inner.refreshing.is_none() {
            return self.seeds_plan();
        }
        self.routing().plan_any(self.next_turn())
    }

    /// [`Client::plan_any`] with the suspected nodes last.
    pub(crate) fn plan_any_demoted(&self) -> QueryPlan {
        let mut plan = self.plan_any();
        plan.demote(&self.suspects());
        plan
    }

    /// A gRPC client of `node`'s `Client` service, on one of its channels.
    pub(crate) fn pool_client(&self, node: SocketAddr) -> Result<ClientClient<Transport>> {
        self.inner.pool.client(node)
    }

    fn seeds_plan(&self) -> QueryPlan {
        QueryPlan {
            nodes: self.inner.seeds.clone(),
            replicas: 0,
        }
    }

    fn next_turn(&self) -> usize {
        self.inner.turn.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// Stamps a write that has no timestamp, if the client stamps writes
    /// ([`ClientConfig::client_timestamps`]); a stamped write is idempotent.
    pub(crate) fn stamp(&self, timestamp: &mut Option<i64>) -> Idempotence {
        if timestamp.is_none() && self.inner.config.client_timestamps {
            *timestamp = Some(self.inner.timestamps.next());
        }
        idempotence(timestamp.is_some())
    }

    /// Reads a key at its consistency level.
    pub async fn get(&self, request: pb::GetRequest) -> Result<pb::GetResponse> {
        let plan = self.plan(&request.keyspace, &request.key);
        self.execute(plan, Idempotence::Idempotent, |mut client| {
            let request = request.clone();
            async move { client.get(request).await }
        })
        .await
    }

    /// Writes a value. Without a timestamp and with
    /// [`ClientConfig::client_timestamps`], the client stamps it (the
    /// response says which timestamp won the write).
    pub async fn put(&self, mut request: pb::PutRequest) -> Result<pb::PutResponse> {
        let idempotence = self.stamp(&mut request.timestamp_micros);
        let plan = self.plan(&request.keyspace, &request.key);
        let timeout = self.inner.config.request_timeout;
        self.execute(plan, idempotence, |mut client| {
            let request = timed(request.clone(), timeout);
            async move { client.put(request).await }
        })
        .await
    }

    /// Deletes a key (a tombstone), stamped as [`Client::put`] stamps.
    pub async fn delete(&self, mut request: pb::DeleteRequest) -> Result<pb::DeleteResponse> {
        let idempotence = self.stamp(&mut request.timestamp_micros);
        let plan = self.plan(&request.keyspace, &request.key);
        let timeout = self.inner.config.request_timeout;
        self.execute(plan, idempotence, |mut client| {
            let request = timed(request.clone(), timeout);
            async move { client.delete(request).await }
        })
        .await
    }

    /// An unlogged batch, routed by its first mutation's key (a batch of
    /// one partition's neighbours gains most); mutations without a
    /// timestamp are stamped as [`Client::put`] stamps. Retried only if
    /// every mutation has a timestamp.
    pub async fn batch(&self, mut request: pb::BatchRequest) -> Result<pb::BatchResponse> {
        if self.inner.config.client_timestamps {
            for mutation in &mut request.mutations {
                mutation
                    .timestamp_micros
                    .get_or_insert_with(|| self.inner.timestamps.next());
            }
        }
        let stamped = request
            .mutations
            .iter()
            .all(|m| m.timestamp_micros.is_some());
        let first_key = request.mutations.first().map_or(&[][..], |m| &m.key[..]);
        let plan = self.plan(&request.keyspace, first_key);
        let timeout = self.inner.config.request_timeout;
        self.execute(plan, idempotence(stamped), |mut client| {
            let request = timed(request.clone(), timeout);
            async move { client.batch(request).await }
        })
        .await
    }

    /// A no-op round trip to the next node (the transport's ceiling).
    pub async fn noop(&self) -> Result<()> {
        let plan = self.plan_any();
        self.execute(plan, Idempotence::Idempotent, |mut client| async move {
            client.noop(pb::NoopRequest {}).await
        })
        .await
        .map(drop)
    }

    /// Runs `call` on the plan's nodes in order until it succeeds, the
    /// retry policy gives up, or attempts run out; each attempt within the
    /// request timeout. A failure that suggests the cluster changed asks
    /// for a refresh.
    pub(crate) async fn execute<T, F, Fut>(
        &self,
        plan: QueryPlan,
        idempotence: Idempotence,
        mut call: F,
    ) -> Result<T>
    where
        F: FnMut(ClientClient<Transport>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let stats = &self.inner.stats;
        stats.requests.fetch_add(1, Ordering::Relaxed);
        if plan.replicas > 0 {
            stats.routed_to_replica.fetch_add(1, Ordering::Relaxed);
        }
        if plan.nodes.is_empty() {
            return Err(ClientError::NoNode);
        }
        let mut plan = plan;
        plan.demote(&self.suspects());
        let timeout = self.inner.config.request_timeout;
        let mut attempt = 0u32;
        loop {
            let node: SocketAddr = plan.nodes[attempt as usize];
            attempt += 1;
            let client = self.inner.pool.client(node)?;
            let (error, failure) = match tokio::time::timeout(timeout, call(client)).await {
                Ok(Ok(response)) => return Ok(response.into_inner()),
                // tonic ends a call at its gRPC deadline itself, a moment
                // before the timeout above would: the same timeout.
                Ok(Err(status)) if ringstore_proto::deadline_expired(&status) => (
                    ClientError::Timeout { node, timeout },
                    AttemptFailure::Timeout,
                ),
                Ok(Err(status)) => {
                    let failure = AttemptFailure::of_status(&status);
                    let error = ClientError::Status {
                        node,
                        source: status,
                    };
                    (error, failure)
                }
                Err(_) => (
                    ClientError::Timeout { node, timeout },
                    AttemptFailure::Timeout,
                ),
            };
            if failure.suggests_topology_change() {
                self.want_refresh();
            }
            if matches!(
                failure,
                AttemptFailure::Unreachable | AttemptFailure::Transport
            ) {
                self.suspect(node);
            }
            // A node is asked once: another attempt there would meet what
            // failed this one.
            if attempt as usize >= plan.nodes.len() {
                return Err(error);
            }
            match self
                .inner
                .config
                .retry
                .decide(idempotence, failure, attempt)
            {
                RetryDecision::RetryNext => {
                    tracing::debug!(%node, %error, attempt, "retrying on the next node");
                    stats.retries.fetch_add(1, Ordering::Relaxed);
                }
                RetryDecision::Fail => return Err(error),
            }
        }
    }
}

impl Client {
    /// The nodes currently suspected; forgets those whose time is up.
    fn suspects(&self) -> Vec<SocketAddr> {
        let mut suspects = self.inner.suspects.lock().expect("suspects lock");
        if suspects.is_empty() {
            return Vec::new();
        }
        let now = Instant::now();
        suspects.retain(|_, until| *until > now);
        suspects.keys().copied().collect()
    }

    fn suspect(&self, node: SocketAddr) {
        let until = Instant::now() + self.inner.config.suspect_for;
        self.inner
            .suspects
            .lock()
            .expect("suspects lock")
            .insert(node, until);
    }
}

fn idempotence(stamped: bool) -> Idempotence {
    if stamped {
        Idempotence::Idempotent
    } else {
        Idempotence::NotIdempotent
    }
}

/// The first address `address` (`HOST:PORT`) resolves to.
async fn resolve(address: &str) -> Result<SocketAddr> {
    let failed = |reason: String| ClientError::Resolve {
        address: address.to_string(),
        reason,
    };
    let mut found = tokio::net::lookup_host(address)
        .await
        .map_err(|e| failed(e.to_string()))?;
    found
        .next()
        .ok_or_else(|| failed("the name resolves to no address".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refused(seeds: Vec<&str>) -> ClientError {
        let mut config = ClientConfig::new(seeds);
        config.connect_timeout = std::time::Duration::from_secs(2);
        config.request_timeout = std::time::Duration::from_secs(2);
        Client::connect(config).await.unwrap_err()
    }

    #[tokio::test]
    async fn bad_seeds_are_clear_errors_naming_them() {
        let none = refused(vec![]).await;
        assert!(none.to_string().contains("no seed"), "{none}");
        let unknown = refused(vec!["no-such-node.invalid:7100"]).await;
        assert!(
            matches!(&unknown, ClientError::Resolve { address, .. } if address == "no-such-node.invalid:7100"),
            "{unknown}"
        );
        // Nothing listens on port 1: every seed is tried, the last failure kept.
        let down = refused(vec!["127.0.0.1:1", "127.0.0.2:1"]).await;
        let message = down.to_string();
        assert!(message.contains("127.0.0.1:1, 127.0.0.2:1"), "{message}");
        assert!(message.contains("127.0.0.2:1: "), "{message}");
        assert_eq!(down.code(), tonic::Code::Unavailable);
    }
}
