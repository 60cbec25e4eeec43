//! Connecting to a node's client port, telling a node that cannot be reached
//! apart from one that answers with an error.

use std::net::SocketAddr;
use std::time::Duration;

use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_proto::v1::repair_client::RepairClient;
use ringstore_proto::v1::schema_client::SchemaClient;
use ringstore_proto::v1::topology_client::TopologyClient;
use std::path::Path;

use anyhow::Context;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

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

/// A connected channel to one node.
#[derive(Clone)]
pub struct Connection {
    channel: Channel,
}

impl Connection {
    /// Connects to `host` (`HOST:PORT`; a host name is resolved first),
    /// failing fast (5 s) with [`Failure::Connect`].
    /// With `tls`, over TLS.
    pub async fn open(host: &str, tls: Option<&ClientTls>) -> Result<Connection, Failure> {
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
        Ok(Connection { channel })
    }

    /// The `Client` service.
    pub fn client(&self) -> ClientClient<Channel> {
        ClientClient::new(self.channel.clone())
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// The `Schema` service.
    pub fn schema(&self) -> SchemaClient<Channel> {
        SchemaClient::new(self.channel.clone())
    }

    /// The `Admin` service.
    pub fn admin(&self) -> AdminClient<Channel> {
        AdminClient::new(self.channel.clone())
    }

    /// The `Repair` service.
    pub fn repair(&self) -> RepairClient<Channel> {
        RepairClient::new(self.channel.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// The `Topology` service. A plan lists every moving range (vnodes times
    /// keyspaces), which outgrows tonic's default 4 MiB in big clusters.
    pub fn topology(&self) -> TopologyClient<Channel> {
        TopologyClient::new(self.channel.clone()).max_decoding_message_size(MAX_MESSAGE_BYTES)
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
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
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
