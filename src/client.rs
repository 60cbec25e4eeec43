//! Connecting to a node's client port, telling a node that cannot be reached
//! apart from one that answers with an error.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_proto::v1::repair_client::RepairClient;
use ringstore_proto::v1::schema_client::SchemaClient;
use ringstore_proto::v1::topology_client::TopologyClient;
use ringstore_proto::v1::users_client::UsersClient;
use std::path::Path;

use anyhow::Context;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use ringstore_client::{ClientConfig, Routing};

use crate::failure::Failure;

/// The largest message the CLI sends or accepts.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// TLS for the client port: the CA to trust, and a client certificate for
/// nodes that require one.
pub struct ClientTls(ClientTlsConfig);

impl ClientTls {
    /// From the `--ca-cert`, `--client-cert` and `--client-key` files;
    /// `None` without a CA (plaintext). A file that cannot be read is an
    /// error naming it.
    pub fn from_files(
        ca: Option<&Path>,
        certificate: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<Option<ClientTls>, Failure> {
        let Some(ca) = ca else { return Ok(None) };
        let read = |path: &Path, flag: &str| {
            std::fs::read(path).with_context(|| format!("cannot read {flag} {}", path.display()))
        };
        let mut config =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca, "--ca-cert")?));
        if let (Some(certificate), Some(key)) = (certificate, key) {
            config = config.identity(Identity::from_pem(
                read(certificate, "--client-cert")?,
                read(key, "--client-key")?,
            ));
        }
        Ok(Some(ClientTls(config)))
    }
}

/// The user name and password every request carries (`--user`,
/// `--password`): the client library's, sent as it sends them.
pub use ringstore_client::Credentials;

/// The credentials of `--user` and `--password`, or an error naming the flag.
pub fn credentials(user: Option<&str>, password: Option<&str>) -> Result<Credentials, Failure> {
    Credentials::new(user, password)
        .map_err(|_| anyhow::anyhow!("--user must be letters, digits and _ - . @").into())
}

/// A channel whose every request carries the credentials.
pub type Transport = ringstore_client::Transport;

/// A connected channel to one node.
#[derive(Clone)]
pub struct Connection {
    channel: Channel,
    credentials: Credentials,
    /// The node's address, resolved.
    address: SocketAddr,
    tls: Option<ClientTlsConfig>,
    /// How long the client library waits for a node's answer.
    request_timeout: Duration,
}

impl Connection {
    /// Connects to `host` (`HOST:PORT`; a host name is resolved first),
    /// failing fast (5 s) with [`Failure::Connect`].
    /// With `tls`, over TLS; every request carries `credentials`.
    pub async fn open(
        host: &str,
        tls: Option<&ClientTls>,
        credentials: Credentials,
    ) -> Result<Connection, Failure> {
        let address = resolve(host).await?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(|e| Failure::Other(e.into()))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true);
        if let Some(ClientTls(config)) = tls {
            endpoint = endpoint
                .tls_config(config.clone())
                .context("invalid --ca-cert, --client-cert or --client-key")?;
        }
        let channel = endpoint.connect().await.map_err(|error| Failure::Connect {
            address: address.to_string(),
            reason: match tls {
                Some(_) => root_cause(&error),
                None => format!(
                    "{} (if the node serves TLS, pass --ca-cert)",
                    root_cause(&error)
                ),
            },
        })?;
        Ok(Connection {
            channel,
            credentials,
            address,
            tls: tls.map(|ClientTls(config)| config.clone()),
            request_timeout: ClientConfig::new(Vec::<String>::new()).request_timeout,
        })
    }

    /// This connection, with the client library waiting `timeout` for a
    /// node's answer (`--request-timeout`).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Connection {
        self.request_timeout = timeout;
        self
    }

    /// A connection to another node (`HOST:PORT`) with this one's TLS and
    /// credentials.
    pub async fn to_node(&self, host: &str) -> Result<Connection, Failure> {
        let tls = self.tls.clone().map(ClientTls);
        let connection = Connection::open(host, tls.as_ref(), self.credentials.clone()).await?;
        Ok(connection.with_request_timeout(self.request_timeout))
    }

    /// The node's address, resolved.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// A client library handle seeded with this connection's node, TLS
    /// and credentials: with [`Routing::SeedsOnly`] the node coordinates
    /// everything (as `--host` promises); token-aware, it is only where
    /// the cluster is learned. Writes without a timestamp are stamped by
    /// the library if `client_timestamps`, else by their coordinator.
    pub async fn cluster(
        &self,
        routing: Routing,
        client_timestamps: bool,
    ) -> Result<ringstore_client::Client, Failure> {
        let seeds = [self.address.to_string()];
        self.cluster_through(&seeds, routing, client_timestamps, NonZeroUsize::MIN)
            .await
    }

    /// As [`Connection::cluster`], seeded by `seeds` instead of this
    /// connection's node (same TLS and credentials), with `connections`
    /// HTTP/2 connections to each node.
    pub async fn cluster_through(
        &self,
        seeds: &[String],
        routing: Routing,
        client_timestamps: bool,
        connections: NonZeroUsize,
    ) -> Result<ringstore_client::Client, Failure> {
        let mut config = ClientConfig::new(seeds);
        config.connections_per_node = connections;
        config.routing = routing;
        config.tls = self.tls.clone();
        config.credentials = self.credentials.clone();
        config.client_timestamps = client_timestamps;
        config.request_timeout = self.request_timeout;
        config.max_message_bytes = MAX_MESSAGE_BYTES;
        Ok(ringstore_client::Client::connect(config).await?)
    }

    fn transport(&self) -> Transport {
        InterceptedService::new(self.channel.clone(), self.credentials.clone())
    }

    /// The `Schema` service.
    pub fn schema(&self) -> SchemaClient<Transport> {
        SchemaClient::new(self.transport())
    }

    /// The `Admin` service.
    pub fn admin(&self) -> AdminClient<Transport> {
        AdminClient::new(self.transport())
    }

    /// The `Repair` service.
    pub fn repair(&self) -> RepairClient<Transport> {
        RepairClient::new(self.transport()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// The `Topology` service. A plan lists every moving range (vnodes times
    /// keyspaces), which outgrows tonic's default 4 MiB in big clusters.
    pub fn topology(&self) -> TopologyClient<Transport> {
        TopologyClient::new(self.transport()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }
}

impl Connection {
    /// The `Users` service.
    pub fn users(&self) -> UsersClient<Transport> {
        UsersClient::new(self.transport())
    }
}

/// The first address `host` (`HOST:PORT`) resolves to.
async fn resolve(host: &str) -> Result<SocketAddr, Failure> {
    let unresolved = |reason: String| Failure::Connect {
        address: host.to_string(),
        reason,
    };
    let mut addresses = tokio::net::lookup_host(host)
        .await
        .map_err(|error| unresolved(format!("cannot resolve the host name: {error}")))?;
    addresses
        .next()
        .ok_or_else(|| unresolved("the host name resolves to no address".into()))
}

/// The innermost message of an error chain ("Connection refused (os error 111)").
pub fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn host_names_and_addresses_resolve() {
        assert_eq!(
            resolve("127.0.0.3:7100").await.unwrap(),
            "127.0.0.3:7100".parse::<SocketAddr>().unwrap()
        );
        let local = resolve("localhost:7100").await.unwrap();
        assert!(local.ip().is_loopback() && local.port() == 7100, "{local}");
    }

    #[tokio::test]
    async fn an_unknown_host_name_is_a_connect_failure_naming_it() {
        let failure = resolve("no-such-node.invalid:7100").await.unwrap_err();
        let message = failure.to_string();
        assert!(
            message.contains("no-such-node.invalid:7100") && message.contains("resolve"),
            "{message}"
        );
    }
}
