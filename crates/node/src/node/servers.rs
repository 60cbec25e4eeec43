//! The node's listening sockets and the servers on them: the client port
//! (client, schema, admin, topology, repair and user services, behind the
//! client authenticator), the internode port (behind the members' proofs:
//! see [`crate::internode_auth`]), and the optional `GET /metrics` port.
//!
//! The sockets are bound before the node context exists, so a port that is
//! taken fails the start at once and the context knows its real addresses
//! (a port of 0 in tests). They come from the node's
//! [`Network`](crate::platform::Network): the operating system's TCP, or a
//! simulated network's listeners, served alike.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::Stream;

use ringstore_internode_auth::{DEFAULT_MAX_SKEW_MS, DEFAULT_REPLAY_CAPACITY, Verifier};
use ringstore_proto::v1::admin_server::AdminServer;
use ringstore_proto::v1::client_server::ClientServer;
use ringstore_proto::v1::internode_server::InternodeServer;
use ringstore_proto::v1::repair_server::RepairServer;
use ringstore_proto::v1::schema_server::SchemaServer;
use ringstore_proto::v1::topology_server::TopologyServer;
use ringstore_proto::v1::users_server::UsersServer;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Server;
use tonic::transport::server::{Connected, TcpIncoming};

use super::tasks::wait_for;
use crate::client_auth::{ClientAuthLayer, Gate};
use crate::config::NodeConfig;
use crate::context::NodeContext;
use crate::error::{NodeError, Result, StartupError};
use crate::internode_auth::{InternodeAuthLayer, PeerDirectory};
use crate::metrics_http::{self, MetricsAccess};
use crate::platform::{Accepted, Keepalive, Listener, Network};
use crate::services::admin::AdminService;
use crate::services::client::ClientService;
use crate::services::internode::InternodeService;
use crate::services::repair::RepairService;
use crate::services::schema::SchemaService;
use crate::services::topology::TopologyService;
use crate::services::users::UsersService;
use crate::tls::server::accept_tls;
use crate::tls::{ServerTls, TlsHandles};

/// The largest gRPC message accepted: a 16 MiB value plus its envelope.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// The node's bound sockets.
pub(super) struct Listeners {
    sockets: Sockets,
    /// Where the client port listens.
    pub client_address: SocketAddr,
    /// Where the internode port listens.
    pub internode_address: SocketAddr,
}

/// The listening sockets, from the operating system or a transport.
enum Sockets {
    Os {
        client: TcpListener,
        internode: TcpListener,
        metrics: Option<TcpListener>,
    },
    Simulated {
        client: Box<dyn Listener>,
        internode: Box<dyn Listener>,
    },
}

impl Listeners {
    /// Binds the client, internode and (when configured) metrics ports on
    /// `network`.
    pub async fn bind(config: &NodeConfig, network: &Network) -> Result<Listeners> {
        match network {
            Network::Os => Self::bind_os(config).await,
            Network::Simulated(transport) => {
                if let Some(address) = config.metrics_bind_address() {
                    return Err(StartupError::MetricsOnSimulatedNetwork(address).into());
                }
                let listen = |address| async move {
                    let listener = transport
                        .listen(address)
                        .await
                        .map_err(|e| cannot_listen(address, e))?;
                    let local = listener
                        .local_addr()
                        .map_err(|e| cannot_listen(address, e))?;
                    Ok::<_, NodeError>((listener, local))
                };
                let (client, client_address) = listen(config.listen_address).await?;
                let (internode, internode_address) = listen(config.internode_address).await?;
                Ok(Listeners {
                    sockets: Sockets::Simulated { client, internode },
                    client_address,
                    internode_address,
                })
            }
        }
    }

    async fn bind_os(config: &NodeConfig) -> Result<Listeners> {
        let client = bind(config.listen_address).await?;
        let internode = bind(config.internode_address).await?;
        let metrics = match config.metrics_bind_address() {
            Some(address) => Some(bind(address).await?),
            None => None,
        };
        Ok(Listeners {
            client_address: local_address(&client, config.listen_address)?,
            internode_address: local_address(&internode, config.internode_address)?,
            sockets: Sockets::Os {
                client,
                internode,
                metrics,
            },
        })
    }
}

/// How the ports are secured.
pub(super) struct PortSecurity {
    /// TLS of the client and internode ports (none: plaintext).
    pub tls: TlsHandles,
    /// The members and keys internode calls are checked against (none: no
    /// cluster secret, the port is open).
    pub directory: Option<Arc<PeerDirectory>>,
    /// The client authenticator's gate (none: `allow_all`).
    pub gate: Option<Arc<Gate>>,
    /// How internode connections detect a peer that stopped answering.
    pub keepalive: Keepalive,
}

/// Serves every port until `stopped` turns true; returns the servers' tasks.
pub(super) fn serve(
    context: &Arc<NodeContext>,
    listeners: Listeners,
    security: PortSecurity,
    stopped: &watch::Receiver<bool>,
) -> Result<Vec<JoinHandle<()>>> {
    match listeners.sockets {
        Sockets::Os {
            client,
            internode,
            metrics,
        } => {
            let client_tls = security.tls.client.clone();
            let internode_tls = security.tls.internode.clone();
            let mut tasks = vec![
                match client_tls {
                    None => serve_client(context, incoming(client), &security, stopped),
                    Some(tls) => {
                        serve_client(context, tls_incoming(client, tls), &security, stopped)
                    }
                },
                match internode_tls {
                    None => serve_internode(context, incoming(internode), security, stopped),
                    Some(tls) => {
                        serve_internode(context, tls_incoming(internode, tls), security, stopped)
                    }
                },
            ];
            if let Some(listener) = metrics {
                let access = metrics_access(&context.config, &listener)?;
                tasks.push(tokio::spawn(metrics_http::serve(
                    listener,
                    context.clone(),
                    context.clone(),
                    access,
                    wait_for(stopped.clone()),
                )));
            }
            Ok(tasks)
        }
        Sockets::Simulated { client, internode } => {
            if security.tls.client.is_some() || security.tls.internode.is_some() {
                return Err(StartupError::TlsOnSimulatedNetwork.into());
            }
            Ok(vec![
                serve_client(context, Accepted::stream(client), &security, stopped),
                serve_internode(context, Accepted::stream(internode), security, stopped),
            ])
        }
    }
}

/// How `GET /metrics` on `listener` is secured, its files read; logged,
/// as unsafe when it is open to a network beside a secured client port.
fn metrics_access(config: &NodeConfig, listener: &TcpListener) -> Result<MetricsAccess> {
    let settings = &config.metrics_security;
    let client = &config.client_encryption;
    let access = MetricsAccess::from_settings(
        settings,
        client.certificate.as_deref(),
        client.private_key.as_deref(),
    )?;
    let address = listener.local_addr().ok();
    if let Some(address) = address
        && settings.open_beside_secured(address, config.client_port_secured())
    {
        tracing::warn!(
            %address,
            "UNSAFE: /metrics is served in clear to anyone who reaches {address} while the \
             client port is secured (metrics_security.allow_open = true)"
        );
    } else {
        tracing::info!(
            ?address,
            tls = settings.tls,
            bearer_token = settings.bearer_token_file.is_some(),
            "serving GET /metrics"
        );
    }
    Ok(access)
}

/// What a server serves: a stream of accepted connections (TCP, or a
/// transport's).
trait Incoming: Stream<Item = std::io::Result<Self::Io>> + Send + 'static {
    /// One connection.
    type Io: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static;
}

impl<S, Io> Incoming for S
where
    S: Stream<Item = std::io::Result<Io>> + Send + 'static,
    Io: AsyncRead + AsyncWrite + Connected + Unpin + Send + 'static,
{
    type Io = Io;
}

fn serve_client(
    context: &Arc<NodeContext>,
    incoming: impl Incoming,
    security: &PortSecurity,
    stopped: &watch::Receiver<bool>,
) -> JoinHandle<()> {
    let gate = security.gate.clone();
    let client_auth = gate
        .clone()
        .map_or_else(ClientAuthLayer::open, ClientAuthLayer::new);
    let server = Server::builder()
        .layer(client_auth)
        .add_service(
            ClientServer::new(ClientService::new(
                context.clone(),
                gate.clone(),
                stopped.clone(),
            ))
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(SchemaServer::new(SchemaService::new(context.clone())))
        .add_service(AdminServer::new(AdminService::new(context.clone())))
        .add_service(TopologyServer::new(TopologyService::new(context.clone())))
        .add_service(RepairServer::new(RepairService::new(context.clone())))
        .add_service(UsersServer::new(UsersService::new(context.clone(), gate)))
        .serve_with_incoming_shutdown(incoming, wait_for(stopped.clone()));
    tokio::spawn(async move {
        if let Err(error) = server.await {
            tracing::error!(%error, "client server failed");
        }
    })
}

fn serve_internode(
    context: &Arc<NodeContext>,
    incoming: impl Incoming,
    security: PortSecurity,
    stopped: &watch::Receiver<bool>,
) -> JoinHandle<()> {
    let internode_auth = match security.directory {
        Some(directory) => InternodeAuthLayer::new(
            Verifier::new(
                directory.local(),
                DEFAULT_MAX_SKEW_MS,
                DEFAULT_REPLAY_CAPACITY,
            ),
            directory,
        ),
        None => InternodeAuthLayer::open(),
    };
    let server = Server::builder()
        .http2_keepalive_interval(Some(security.keepalive.interval))
        .http2_keepalive_timeout(Some(security.keepalive.timeout))
        .layer(internode_auth)
        .add_service(
            InternodeServer::new(InternodeService::new(context.clone(), stopped.clone()))
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .serve_with_incoming_shutdown(incoming, wait_for(stopped.clone()));
    tokio::spawn(async move {
        if let Err(error) = server.await {
            tracing::error!(%error, "internode server failed");
        }
    })
}

/// Accepted connections with Nagle's algorithm off: small replies must not
/// wait for delayed ACKs (a ~40 ms tail otherwise).
fn incoming(listener: TcpListener) -> TcpIncoming {
    TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// The TLS connections accepted on `listener`, with `tls`'s configuration
/// of the moment (see [`crate::tls::server`]).
fn tls_incoming(listener: TcpListener, tls: ServerTls) -> impl Incoming {
    accept_tls(incoming(listener), tls)
}

async fn bind(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address)
        .await
        .map_err(|e| cannot_listen(address, e))
}

fn local_address(listener: &TcpListener, configured: SocketAddr) -> Result<SocketAddr> {
    listener
        .local_addr()
        .map_err(|e| cannot_listen(configured, e))
}

fn cannot_listen(address: SocketAddr, error: std::io::Error) -> NodeError {
    NodeError::Io {
        what: format!("cannot listen on {address}"),
        source: error,
    }
}
