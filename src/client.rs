//! Connecting to a node's client port, telling a node that cannot be reached
//! apart from one that answers with an error.

use std::net::SocketAddr;
use std::time::Duration;

use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_proto::v1::repair_client::RepairClient;
use ringstore_proto::v1::schema_client::SchemaClient;
use ringstore_proto::v1::topology_client::TopologyClient;
use tonic::transport::{Channel, Endpoint};

use crate::failure::Failure;

/// The largest message the CLI sends or accepts.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// A connected channel to one node.
#[derive(Clone)]
pub struct Connection {
    channel: Channel,
}

impl Connection {
    /// Connects to `host` (`HOST:PORT`; a host name is resolved first),
    /// failing fast (5 s) with [`Failure::Connect`].
    pub async fn open(host: &str) -> Result<Connection, Failure> {
        let address = resolve(host).await?;
        let endpoint = Endpoint::from_shared(format!("http://{address}"))
            .map_err(|e| Failure::Other(e.into()))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true);
        let channel = endpoint.connect().await.map_err(|error| Failure::Connect {
            address: address.to_string(),
            reason: root_cause(&error),
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
