//! Starting and stopping a node: storage, identity, membership, tokens,
//! schema, and the gRPC servers, in that order.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringstore_auth::{DEFAULT_MAX_SKEW_MS, DEFAULT_REPLAY_CAPACITY, InternodeKey, Verifier};
use ringstore_membership::{
    ClusterSecret, Membership, MembershipConfig, MetadataStamp, NodeIdentity, NodeMetadata,
    NodeRecord, NodeState,
};
use ringstore_proto::v1::admin_server::AdminServer;
use ringstore_proto::v1::client_server::ClientServer;
use ringstore_proto::v1::internode_server::InternodeServer;
use ringstore_proto::v1::repair_server::RepairServer;
use ringstore_proto::v1::schema_server::SchemaServer;
use ringstore_proto::v1::topology_server::TopologyServer;
use ringstore_proto::v1::users_server::UsersServer;
use ringstore_storage::{Durability, SledEngine, SledOptions, Store};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Server, ServerTlsConfig};

use crate::client_auth::{self, Authenticator, ClientAuthLayer, Gate};
use crate::clock::{self, Resumed, TimestampSource, WallClock};
use crate::config::{DurabilityMode, FailureDetection, NodeConfig};
use crate::context::NodeContext;
use crate::error::{NodeError, Result};
use crate::handoff::Handoff;
use crate::internode_auth::{CallSigner, InternodeAuthLayer};
use crate::keyspace_sizes::KeyspaceSizes;
use crate::peers::Peers;
use crate::placements::Placements;
use crate::repair::{self, state::RepairState};
use crate::schema_store::SchemaStore;
use crate::services::admin::AdminService;
use crate::services::client::ClientService;
use crate::services::internode::InternodeService;
use crate::services::repair::RepairService;
use crate::services::schema::SchemaService;
use crate::services::topology::TopologyService;
use crate::services::users::UsersService;
use crate::serving::Serving;
use crate::tls::TlsError;
use crate::topology::{bootstrap, saved};
use crate::{disk_failure, metrics_http, schema_sync, tokens};
use ringstore_metrics::NodeMetrics;
use ringstore_streaming::{StreamThrottle, Streams};

/// The largest gRPC message accepted: a 16 MiB value plus its envelope.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A started node. Dropping it does not stop it: call [`RunningNode::shutdown`].
pub struct RunningNode {
    /// The node's shared state.
    pub context: Arc<NodeContext>,
    /// Where its client service listens.
    pub client_address: SocketAddr,
    /// Where its internode service listens.
    pub internode_address: SocketAddr,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    membership_task: JoinHandle<()>,
}

impl RunningNode {
    /// Resolves when the node asks to be stopped: after it has left the
    /// ring (decommission), or when it could not join it. The caller then
    /// calls [`RunningNode::shutdown`].
    pub async fn stop_requested(&self) {
        let mut requested = self.context.stop_requested.subscribe();
        let _ = requested.wait_for(|&stop| stop).await;
    }

    /// Stops the node: announces its departure to the cluster, stops serving,
    /// and flushes storage. Waits for all of it.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
        let _ = self.membership_task.await;
        clock::save_high_water(&self.context.store, &self.context.clock).await?;
        self.context.store.close().await?;
        tracing::info!("node stopped");
        Ok(())
    }
}

/// Starts a node with `config` and returns once it serves requests (a fresh
/// node chooses its tokens in the background).
pub async fn start(config: NodeConfig) -> Result<RunningNode> {
    let wall_clock = Arc::new(WallClock::with_offset_ms(config.test_clock_offset_ms));
    if config.test_clock_offset_ms != 0 {
        tracing::warn!(
            offset_ms = config.test_clock_offset_ms,
            "test_clock_offset_ms is set: this node's clock is deliberately wrong (for tests only)"
        );
    }
    let now = u64::try_from(wall_clock.now().0 / 1_000_000)
        .unwrap_or(1)
        .max(1);
    let record = NodeRecord::load_for_start(&config.data_dir, &config.cluster_name, now)?;
    let store = open_store(&config).await?;
    if saved::was_decommissioned(&store)? {
        return Err(NodeError::Decommissioned {
            data_dir: config.data_dir.clone(),
        });
    }
    if config.replace_address.is_some() && config.initial_token.is_some() {
        return Err(NodeError::InvalidArgument(
            "replace_address and initial_token exclude each other: a replacement takes the dead node's tokens"
                .into(),
        ));
    }
    let fresh = tokens::saved_tokens(&store)?.is_none();
    if fresh {
        // Before any token is saved: a restart after it must still bootstrap.
        saved::set_unfinished_bootstrap(&store, Some(bootstrap::BOOTSTRAP)).await?;
    }
    let tokens = tokens::startup_tokens(&store, config.initial_token.as_deref()).await?;
    let schema = SchemaStore::load(store.clone())?;
    let clock = resume_clock(&store, &config, wall_clock.clone())?;
    let handoff = Handoff::open(&store, &config.hints, wall_clock.clone())?;
    let takeovers = saved::saved_takeovers(&store)?;
    let unfinished_bootstrap = saved::unfinished_bootstrap(&store)?;

    let metadata = NodeMetadata {
        host_id: record.host_id,
        stamp: MetadataStamp {
            generation: record.generation,
            version: 1,
        },
        cluster_name: config.cluster_name.clone(),
        dc: config.dc.as_str().into(),
        rack: config.rack.as_str().into(),
        client_addr: config.advertised_client_address(),
        internode_addr: config.advertised_internode_address(),
        gossip_addr: config.advertised_gossip_address(),
        // A fresh node gossips its tokens only when its turn to join comes.
        state: if !fresh && unfinished_bootstrap.is_none() {
            NodeState::Normal
        } else {
            NodeState::Joining
        },
        tokens: if fresh {
            Vec::new()
        } else {
            tokens.clone().unwrap_or_default()
        },
        load_bytes: store.load_bytes(),
        schema_version: schema.current().version(),
        software_version: env!("CARGO_PKG_VERSION").to_string(),
        takeovers,
    };
    let identity = NodeIdentity {
        host_id: record.host_id,
        gossip_addr: config.advertised_gossip_address(),
        generation: record.generation,
        rejoin: 0,
    };
    let preset = match config.failure_detection {
        FailureDetection::Lan => MembershipConfig::lan,
        FailureDetection::Relaxed => MembershipConfig::relaxed,
    };
    let membership_config = preset(config.cluster_name.clone(), config.seeds.clone())
        .with_secret(
            config
                .cluster_secret
                .as_ref()
                .and_then(|secret| ClusterSecret::new(secret.expose())),
        )
        .with_max_clock_offset(Duration::from_millis(config.max_clock_offset_ms));
    let membership = Membership::new(membership_config, identity, metadata, rand::random())
        .with_clock(wall_clock.clone());

    let (stop, stopped) = watch::channel(false);
    // Gossip stops when the node stops, or no longer serves (drained, or
    // stopped by a disk failure).
    let (serving, mut serving_rx) = watch::channel(Serving::Normal);
    let gossip_stop = {
        let stopped = stopped.clone();
        async move {
            tokio::select! {
                () = wait_for(stopped) => {}
                _ = serving_rx.wait_for(|serving| !serving.is_normal()) => {}
            }
        }
    };
    let (membership, membership_task) =
        ringstore_membership::start(membership, config.gossip_address, gossip_stop).await?;

    let client_listener = bind(config.listen_address).await?;
    let internode_listener = bind(config.internode_address).await?;
    let metrics_listener = match config.metrics_bind_address() {
        Some(address) => Some(bind(address).await?),
        None => None,
    };
    let client_address = client_listener
        .local_addr()
        .map_err(|e| io_error(config.listen_address, e))?;
    let internode_address = internode_listener
        .local_addr()
        .map_err(|e| io_error(config.internode_address, e))?;

    tracing::info!(
        host_id = %record.host_id,
        generation = %record.generation,
        cluster = %config.cluster_name,
        client = %client_address,
        internode = %internode_address,
        gossip = %config.gossip_address,
        "node starting"
    );
    let internode_key = config
        .cluster_secret
        .as_ref()
        .and_then(|secret| InternodeKey::from_secret(secret.expose().as_bytes()));
    if internode_key.is_none() {
        tracing::warn!(
            internode = %internode_address,
            "no cluster_secret: the internode port accepts schema changes, writes and \
             streams from anyone who can reach it (and gossip is unauthenticated); \
             set cluster_secret on every node"
        );
    }
    let signer = internode_key
        .clone()
        .map(|key| CallSigner::new(key, record.host_id));
    let client_tls = config.client_encryption.server_config()?;
    let internode_tls = config.server_encryption.configs()?;
    let (internode_server_tls, internode_client_tls) = internode_tls.unzip();
    let config_throughput = config.stream_throughput_mib_per_sec;
    let repair = RepairState::load(&store, config.repair.validation_mib_per_sec)?;
    let metrics = Arc::new(NodeMetrics::new()?);
    let observed = metrics.clone();
    store.observe_syncs(move |elapsed| observed.storage_synced(elapsed));
    let peers = Peers::new(signer, internode_client_tls, config.internode_address.ip());
    let context = Arc::new(NodeContext {
        config,
        host_id: record.host_id,
        generation: record.generation,
        store,
        membership,
        schema,
        placements: Placements::default(),
        peers,
        clock,
        clock_guard: Default::default(),
        handoff,
        started: Instant::now(),
        stream_throttle: StreamThrottle::new(config_throughput),
        streams: Streams::default(),
        operation: tokio::sync::Mutex::new(()),
        repair,
        stop_requested: watch::channel(false).0,
        metrics,
        keyspace_sizes: KeyspaceSizes::default(),
        read_latencies: Default::default(),
        read_flights: Default::default(),
        serving,
    });

    let mut tasks = Vec::new();
    let gate = match context.config.auth.authenticator {
        Authenticator::Password => Some(Arc::new(Gate::new(context.clone()))),
        Authenticator::AllowAll => {
            tracing::info!(
                "authenticator = allow_all: anyone who reaches the client port may read, write \
                 and operate the cluster"
            );
            None
        }
    };
    let client_auth = gate
        .clone()
        .map_or_else(ClientAuthLayer::open, ClientAuthLayer::new);
    let client_server = tls_server(client_tls, "client", "client_encryption")?
        .layer(client_auth)
        .add_service(
            ClientServer::new(ClientService::new(context.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(SchemaServer::new(SchemaService::new(context.clone())))
        .add_service(AdminServer::new(AdminService::new(context.clone())))
        .add_service(TopologyServer::new(TopologyService::new(context.clone())))
        .add_service(RepairServer::new(RepairService::new(context.clone())))
        .add_service(UsersServer::new(UsersService::new(
            context.clone(),
            gate.clone(),
        )))
        .serve_with_incoming_shutdown(incoming(client_listener), wait_for(stopped.clone()));
    tasks.push(tokio::spawn(async move {
        if let Err(error) = client_server.await {
            tracing::error!(%error, "client server failed");
        }
    }));
    let internode_auth = match internode_key {
        Some(key) => InternodeAuthLayer::new(
            Verifier::new(key, DEFAULT_MAX_SKEW_MS, DEFAULT_REPLAY_CAPACITY),
            context.membership.clone(),
        ),
        None => InternodeAuthLayer::open(),
    };
    let internode_server = tls_server(internode_server_tls, "internode", "server_encryption")?
        .layer(internode_auth)
        .add_service(
            InternodeServer::new(InternodeService::new(context.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .serve_with_incoming_shutdown(incoming(internode_listener), wait_for(stopped.clone()));
    tasks.push(tokio::spawn(async move {
        if let Err(error) = internode_server.await {
            tracing::error!(%error, "internode server failed");
        }
    }));
    if let Some(listener) = metrics_listener {
        tracing::info!(address = ?listener.local_addr().ok(), "serving GET /metrics");
        tasks.push(tokio::spawn(metrics_http::serve(
            listener,
            context.clone(),
            wait_for(stopped.clone()),
        )));
    }
    tasks.push(spawn_until_stopped(
        schema_sync::run(context.clone(), Duration::from_secs(2)),
        stopped.clone(),
    ));
    if gate.is_some() {
        tasks.push(spawn_until_stopped(
            client_auth::bootstrap(context.clone()),
            stopped.clone(),
        ));
    }
    let saving = context.clone();
    tasks.push(spawn_until_stopped(
        async move { clock::keep_saving(saving.store.clone(), &saving.clock).await },
        stopped.clone(),
    ));
    tasks.push(spawn_until_stopped(
        report_load(context.clone()),
        stopped.clone(),
    ));
    tasks.push(spawn_until_stopped(
        Handoff::run(context.clone()),
        stopped.clone(),
    ));
    tasks.push(spawn_until_stopped(
        stop_if_removed(context.clone()),
        stopped.clone(),
    ));
    tasks.push(spawn_until_stopped(
        disk_failure::watch(context.clone()),
        stopped.clone(),
    ));
    tasks.push(spawn_until_stopped(
        repair::scheduler::run(context.clone()),
        stopped.clone(),
    ));
    tasks.push(spawn_until_stopped(
        repair::gc::run(context.clone()),
        stopped.clone(),
    ));
    let resuming = context.clone();
    tasks.push(spawn_until_stopped(
        async move {
            if let Err(error) = repair::job::resume(resuming).await {
                tracing::warn!(%error, "could not resume the interrupted repair");
            }
        },
        stopped.clone(),
    ));
    let joining = context.clone();
    let replace_address = context.config.replace_address.clone();
    let join: Option<Pin<Box<dyn Future<Output = Result<()>> + Send>>> =
        match (fresh, unfinished_bootstrap, replace_address) {
            (true, _, Some(address)) => Some(Box::pin(bootstrap::replace(joining, address))),
            (true, _, None) => Some(Box::pin(async move {
                tokens::join(joining, tokens).await.map(drop)
            })),
            (false, Some(operation), _) => Some(Box::pin(bootstrap::resume(joining, operation))),
            (false, None, _) => None,
        };
    if let Some(join) = join {
        let failed = context.clone();
        tasks.push(spawn_until_stopped(
            async move {
                if let Err(error) = join.await {
                    // A node that cannot take its place must not linger half-joined.
                    tracing::error!(%error, "could not join the ring; stopping");
                    failed.stop_requested.send_replace(true);
                }
            },
            stopped,
        ));
    }
    Ok(RunningNode {
        context,
        client_address,
        internode_address,
        stop,
        tasks,
        membership_task,
    })
}

/// The write-timestamp source, resumed above the mark the previous run saved
/// unless that mark is implausibly far ahead of the wall clock.
fn resume_clock(
    store: &Store,
    config: &NodeConfig,
    wall_clock: Arc<WallClock>,
) -> Result<TimestampSource> {
    let max_ahead = Duration::from_secs(config.max_client_timestamp_skew_seconds);
    let saved = clock::load_high_water(store)?;
    let (source, resumed) = TimestampSource::resume(saved, wall_clock, max_ahead);
    if let Resumed::Distrusted { saved, now } = resumed {
        tracing::warn!(
            %saved,
            %now,
            "the saved clock high-water mark is far ahead of the wall clock; ignoring it \
             (was the clock wrong before the restart?)"
        );
    }
    Ok(source)
}

/// Opens the node's storage, on the blocking pool: opening sled reads its
/// files, and after a crash the store recounts every keyspace's live bytes.
async fn open_store(config: &NodeConfig) -> Result<Store> {
    let options = SledOptions {
        cache_capacity_bytes: config.storage.cache_capacity_mb << 20,
        flush_every_ms: None,
    };
    let path = config.data_dir.join("db");
    let durability = match config.storage.durability {
        DurabilityMode::Batch => Durability::Batch,
        DurabilityMode::Periodic => Durability::Periodic {
            interval: Duration::from_millis(config.storage.periodic_sync_ms.max(1)),
        },
    };
    tokio::task::spawn_blocking(move || {
        let engine = SledEngine::open(path, options)?;
        Ok(Store::open(Arc::new(engine), durability)?)
    })
    .await
    .map_err(|e| NodeError::Internal(format!("opening the storage failed: {e}")))?
}

/// A server builder, serving TLS when `tls` is set (errors name `port` and
/// the settings `section` the files come from).
fn tls_server(
    tls: Option<ServerTlsConfig>,
    port: &'static str,
    section: &'static str,
) -> Result<Server> {
    let server = Server::builder();
    match tls {
        None => Ok(server),
        Some(tls) => server.tls_config(tls).map_err(|source| {
            NodeError::Tls(TlsError::Setup {
                port,
                settings: section,
                source,
            })
        }),
    }
}

/// Accepted connections with Nagle's algorithm off: small replies must not
/// wait for delayed ACKs (a ~40 ms tail otherwise).
fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

async fn bind(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| io_error(address, e))
}

fn io_error(address: SocketAddr, error: std::io::Error) -> NodeError {
    NodeError::Internal(format!("cannot listen on {address}: {error}"))
}

/// Resolves when `stop` turns true (or its sender is gone).
async fn wait_for(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|&stopped| stopped).await;
}

/// Runs `task` until it ends or the node stops.
fn spawn_until_stopped(
    task: impl Future<Output = ()> + Send + 'static,
    stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        tokio::select! {
            () = task => {}
            () = wait_for(stop) => {}
        }
    })
}

/// Asks the node to stop once the cluster says another node removed or
/// replaced it: it no longer owns anything, and must not serve as if it did.
async fn stop_if_removed(context: Arc<NodeContext>) {
    let mut views = context.membership.watch_view();
    loop {
        if views.borrow_and_update().removed.contains(&context.host_id) {
            tracing::error!(
                "this node was removed from the cluster (removenode or replace); stopping. \
                 To join again, start it with an empty data directory"
            );
            context.stop_requested.send_replace(true);
            return;
        }
        if views.changed().await.is_err() {
            return;
        }
    }
}

/// Gossips the node's load when it changed by more than 1% (checked every 10 s).
async fn report_load(context: Arc<NodeContext>) {
    let mut reported = context.store.load_bytes();
    let mut ticker = tokio::time::interval(Duration::from_secs(10));
    loop {
        ticker.tick().await;
        let load = context.store.load_bytes();
        if load.abs_diff(reported) > reported / 100 {
            reported = load;
            let _ = context
                .membership
                .update_local(move |m| m.load_bytes = load)
                .await;
        }
    }
}
