//! In-process test clusters on loopback: each test uses its own
//! `127.<block>.<n>.0` addresses, so tests run in parallel without clashing.

#![allow(dead_code)]

pub mod load;
pub mod member;
pub mod nemesis;
pub mod netproxy;
pub mod processes;
pub mod recorder;
pub mod tls;

use std::net::SocketAddr;
use std::time::Duration;

use ringstore_node::config::FailureDetection;
use ringstore_node::{NodeConfig, RunningNode};
use ringstore_proto::v1 as pb;
use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_proto::v1::internode_client::InternodeClient;
use ringstore_proto::v1::schema_client::SchemaClient;
use ringstore_proto::v1::topology_client::TopologyClient;
use tonic::transport::Channel;

/// Polls `check` every 100 ms until it returns true, failing after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A cluster of in-process nodes.
pub struct TestCluster {
    /// Running nodes (None when stopped).
    pub nodes: Vec<Option<RunningNode>>,
    /// Each node's configuration, reused on restart.
    pub configs: Vec<NodeConfig>,
    _dirs: tempfile::TempDir,
}

impl TestCluster {
    /// The config of node `i` on address block `block` (127.block.0.i+1).
    pub fn config(block: u8, i: usize, racks: usize, dir: &std::path::Path) -> NodeConfig {
        let ip = [127, block, 0, i as u8 + 1];
        NodeConfig {
            cluster_name: format!("test-{block}"),
            data_dir: dir.join(format!("node{i}")),
            listen_address: SocketAddr::from((ip, 7100)),
            internode_address: SocketAddr::from((ip, 7101)),
            gossip_address: SocketAddr::from((ip, 7000)),
            seeds: vec![SocketAddr::from(([127, block, 0, 1], 7000))],
            rack: format!("rack{}", i % racks + 1),
            ring_delay_ms: 500,
            failure_detection: FailureDetection::Lan,
            ..NodeConfig::default()
        }
    }

    /// The configs of `n` nodes of another cluster in block `block`, on
    /// 127.block.0.first+1 onwards: named `test-BLOCK-FIRST`, seeded by
    /// its first node.
    pub fn configs_from(
        block: u8,
        first: usize,
        n: usize,
        dir: &std::path::Path,
    ) -> Vec<NodeConfig> {
        (first..first + n)
            .map(|i| NodeConfig {
                cluster_name: format!("test-{block}-{first}"),
                seeds: vec![SocketAddr::from(([127, block, 0, first as u8 + 1], 7000))],
                ..Self::config(block, i, 1, dir)
            })
            .collect()
    }

    /// Starts the `n` nodes of [`TestCluster::configs_from`] and waits
    /// until they are settled.
    pub async fn start_from(block: u8, first: usize, n: usize) -> TestCluster {
        let dirs = tempfile::tempdir().unwrap();
        let configs = Self::configs_from(block, first, n, dirs.path());
        Self::start_with(configs, dirs).await
    }

    /// Starts `n` fresh nodes on `racks` racks and waits until every node sees
    /// every node up and `Normal` with the same ring.
    pub async fn start(block: u8, n: usize, racks: usize) -> TestCluster {
        let dirs = tempfile::tempdir().unwrap();
        let configs: Vec<NodeConfig> = (0..n)
            .map(|i| Self::config(block, i, racks, dirs.path()))
            .collect();
        Self::start_with(configs, dirs).await
    }

    /// Starts `n` fresh nodes on `racks` racks, node `i`'s config changed
    /// by `tweak(i, config)`, and waits until they are settled (as
    /// [`TestCluster::start`]).
    pub async fn start_configured(
        block: u8,
        n: usize,
        racks: usize,
        tweak: impl Fn(usize, &mut NodeConfig),
    ) -> TestCluster {
        let dirs = tempfile::tempdir().unwrap();
        let configs: Vec<NodeConfig> = (0..n)
            .map(|i| {
                let mut config = Self::config(block, i, racks, dirs.path());
                tweak(i, &mut config);
                config
            })
            .collect();
        Self::start_with(configs, dirs).await
    }

    /// Starts nodes with the given configs.
    pub async fn start_with(configs: Vec<NodeConfig>, dirs: tempfile::TempDir) -> TestCluster {
        let mut nodes = Vec::new();
        for config in &configs {
            nodes.push(Some(
                ringstore_node::start(config.clone())
                    .await
                    .expect("node starts"),
            ));
        }
        let cluster = TestCluster {
            nodes,
            configs,
            _dirs: dirs,
        };
        cluster.wait_until_settled().await;
        cluster
    }

    /// Waits until every running node sees all running nodes up and Normal,
    /// stopped nodes down, and one ring, and then `ring_delay`: until then
    /// writes also reach the replicas of the ring last replaced
    /// (`ringstore_node::settling_ring`), which tests counting copies or
    /// hints per replica must not see.
    pub async fn wait_until_settled(&self) {
        let running: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].is_some())
            .collect();
        eventually(Duration::from_secs(60), "the cluster settles", || async {
            let mut checksums = Vec::new();
            for &i in &running {
                let status = self
                    .admin(i)
                    .await
                    .status(pb::StatusRequest::default())
                    .await;
                let Ok(status) = status else { return false };
                let status = status.into_inner();
                let all_ok = status.nodes.len() == self.nodes.len()
                    && status.nodes.iter().all(|n| {
                        let index = self
                            .configs
                            .iter()
                            .position(|c| c.listen_address.to_string() == n.client_address);
                        let should_be_up = index.is_some_and(|j| self.nodes[j].is_some());
                        n.up == should_be_up && n.state == "NORMAL"
                    });
                if !all_ok {
                    return false;
                }
                checksums.push(status.ring_checksum);
            }
            checksums.windows(2).all(|w| w[0] == w[1])
        })
        .await;
        let ring_delay = self.configs.iter().map(|c| c.ring_delay_ms).max();
        tokio::time::sleep(Duration::from_millis(ring_delay.unwrap_or(0))).await;
    }

    /// Node `i`'s client address.
    pub fn address(&self, i: usize) -> SocketAddr {
        self.configs[i].listen_address
    }

    async fn channel(address: SocketAddr) -> Channel {
        Channel::from_shared(format!("http://{address}"))
            .unwrap()
            .connect_lazy()
    }

    /// A `Client` client of node `i`.
    pub async fn client(&self, i: usize) -> ClientClient<Channel> {
        ClientClient::new(Self::channel(self.address(i)).await)
    }

    /// A `Schema` client of node `i`.
    pub async fn schema(&self, i: usize) -> SchemaClient<Channel> {
        SchemaClient::new(Self::channel(self.address(i)).await)
    }

    /// A `Repair` client of node `i`.
    pub async fn repair(
        &self,
        i: usize,
    ) -> ringstore_proto::v1::repair_client::RepairClient<Channel> {
        ringstore_proto::v1::repair_client::RepairClient::new(Self::channel(self.address(i)).await)
    }

    /// An `Admin` client of node `i`.
    pub async fn admin(&self, i: usize) -> AdminClient<Channel> {
        AdminClient::new(Self::channel(self.address(i)).await)
    }

    /// Node `i`'s metrics page (the Prometheus text).
    pub async fn metrics(&self, i: usize) -> String {
        let response = self.admin(i).await.metrics(pb::MetricsRequest {}).await;
        response.expect("the metrics page").into_inner().text
    }

    /// Node `i`'s configuration.
    pub fn node_config(&self, i: usize) -> &NodeConfig {
        &self.configs[i]
    }

    /// An `Internode` client of node `i` (to look at one replica directly).
    pub async fn internode(&self, i: usize) -> InternodeClient<Channel> {
        InternodeClient::new(Self::channel(self.configs[i].internode_address).await)
    }

    /// Stops node `i` gracefully.
    pub async fn stop(&mut self, i: usize) {
        if let Some(node) = self.nodes[i].take() {
            node.shutdown().await.expect("node stops");
        }
    }

    /// Starts node `i` again with its config and data.
    pub async fn restart(&mut self, i: usize) {
        assert!(self.nodes[i].is_none(), "stop node {i} first");
        self.nodes[i] = Some(
            ringstore_node::start(self.configs[i].clone())
                .await
                .expect("node restarts"),
        );
    }

    /// Starts one more node with `config` (it joins through its seeds and
    /// bootstraps); returns its index without waiting for it to be `Normal`.
    pub async fn add(&mut self, config: NodeConfig) -> usize {
        self.nodes.push(Some(
            ringstore_node::start(config.clone())
                .await
                .expect("node starts"),
        ));
        self.configs.push(config);
        self.nodes.len() - 1
    }

    /// Forgets node `i` (stopped, left or removed): later indices shift down.
    pub fn forget(&mut self, i: usize) -> Option<RunningNode> {
        self.configs.remove(i);
        self.nodes.remove(i)
    }

    /// The directory holding every node's data directory.
    pub fn dir(&self) -> &std::path::Path {
        self._dirs.path()
    }

    /// A `Topology` client of node `i`.
    pub async fn topology(&self, i: usize) -> TopologyClient<Channel> {
        TopologyClient::new(Self::channel(self.address(i)).await)
    }

    /// The shared state of running node `i`.
    pub fn context(&self, i: usize) -> &std::sync::Arc<ringstore_node::context::NodeContext> {
        &self.nodes[i].as_ref().expect("node is running").context
    }

    /// The value node `i` stores for `key` of `keyspace` (its own replica,
    /// no coordination), if live.
    pub fn local_value(&self, i: usize, keyspace: &str, key: &str) -> Option<Vec<u8>> {
        let context = self.context(i);
        let id = context.keyspace(keyspace).expect("keyspace exists").id;
        let cell = context
            .store
            .read(id, key.as_bytes())
            .expect("local read")?;
        cell.value.clone()
    }

    /// The hints running node `i` holds for `target`.
    pub fn hints_for(&self, i: usize, target: ringstore_placement::HostId) -> u64 {
        self.context(i)
            .handoff
            .pending()
            .get(&target)
            .map_or(0, |t| t.hints)
    }

    /// How many internode calls of kind `rpc` (the label: `hint_replay`,
    /// `stream_range`, `repair`...) running node `i` made to node `peer`, as
    /// its metrics page counts them.
    pub async fn internode_calls(&self, i: usize, peer: usize, rpc: &str) -> u64 {
        let page = ringstore_node::metrics::page(self.context(i).as_ref())
            .await
            .expect("metrics page");
        let address = self.configs[peer].advertised_internode_address();
        let series = format!(
            "ringstore_internode_request_duration_seconds_count{{peer=\"{address}\",rpc=\"{rpc}\"}} "
        );
        page.lines()
            .find_map(|l| l.strip_prefix(&series))
            .map_or(0, |v| v.trim().parse().expect("a count"))
    }

    /// Stops every node.
    pub async fn shutdown(mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
    }

    /// Creates a NetworkTopologyStrategy keyspace through node `via` and returns its id.
    pub async fn create_nts_keyspace(
        &self,
        via: usize,
        name: &str,
        rf_per_dc: &[(&str, u32)],
    ) -> String {
        let replication_factors = rf_per_dc
            .iter()
            .map(|&(dc, rf)| (dc.to_string(), rf))
            .collect();
        let strategy = pb::replication::Strategy::NetworkTopology(pb::NetworkTopologyStrategy {
            replication_factors,
        });
        self.create_with(via, name, strategy).await
    }

    /// Creates a SimpleStrategy keyspace through node `via` and returns its id.
    pub async fn create_keyspace(&self, via: usize, name: &str, rf: u32) -> String {
        let strategy = pb::replication::Strategy::Simple(pb::SimpleStrategy {
            replication_factor: rf,
        });
        self.create_with(via, name, strategy).await
    }

    async fn create_with(
        &self,
        via: usize,
        name: &str,
        strategy: pb::replication::Strategy,
    ) -> String {
        let response = self
            .schema(via)
            .await
            .create_keyspace(pb::CreateKeyspaceRequest {
                name: name.into(),
                replication: Some(pb::Replication {
                    strategy: Some(strategy),
                }),
                if_not_exists: false,
                gc_grace_seconds: None,
                speculative_retry: None,
            })
            .await
            .expect("keyspace created")
            .into_inner();
        response.keyspace.unwrap().id
    }
}

/// A put request.
pub fn put(keyspace: &str, key: &str, value: &str, level: pb::ConsistencyLevel) -> pb::PutRequest {
    pb::PutRequest {
        keyspace: keyspace.into(),
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        consistency: level as i32,
        timestamp_micros: None,
        ttl_seconds: None,
    }
}

/// Whether `key` has a live value in `keyspace`, read at `level`.
pub async fn is_found(
    client: &mut ClientClient<Channel>,
    keyspace: &str,
    key: &str,
    level: pb::ConsistencyLevel,
) -> bool {
    client
        .get(get(keyspace, key, level))
        .await
        .unwrap()
        .into_inner()
        .found
}

/// A get request.
pub fn get(keyspace: &str, key: &str, level: pb::ConsistencyLevel) -> pb::GetRequest {
    pb::GetRequest {
        keyspace: keyspace.into(),
        key: key.as_bytes().to_vec(),
        consistency: level as i32,
    }
}

/// Writes `mutations` to `keyspace` through `Batch` at `level`, 1,000 a
/// request, asserting that every one was applied.
pub async fn write_batches(
    client: &mut ClientClient<Channel>,
    keyspace: &str,
    mutations: impl IntoIterator<Item = pb::Mutation>,
    level: pb::ConsistencyLevel,
) {
    let mutations: Vec<pb::Mutation> = mutations.into_iter().collect();
    for chunk in mutations.chunks(1000) {
        let results = client
            .batch(pb::BatchRequest {
                keyspace: keyspace.into(),
                mutations: chunk.to_vec(),
                consistency: level as i32,
            })
            .await
            .expect("batch")
            .into_inner()
            .results;
        assert!(results.iter().all(|r| r.code == 0), "{results:?}");
    }
}
