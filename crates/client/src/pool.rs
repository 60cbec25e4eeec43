//! The connection pool: a few HTTP/2 channels per node, opened lazily (a
//! node that is down costs nothing until asked), taken in turn, and dropped
//! when the node leaves the ring.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use ringstore_proto::v1::admin_client::AdminClient;
use ringstore_proto::v1::client_client::ClientClient;
use ringstore_proto::v1::schema_client::SchemaClient;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

use crate::config::{ClientConfig, Credentials};
use crate::error::{ClientError, Result};

/// A channel whose every request carries the credentials.
pub type Transport = InterceptedService<Channel, Credentials>;

/// Channels per node address.
#[derive(Debug)]
pub(crate) struct Pool {
    config: ClientConfig,
    /// Held only to look up or insert, never across an await.
    channels: Mutex<HashMap<SocketAddr, Vec<Channel>>>,
    turn: AtomicUsize,
}

impl Pool {
    pub(crate) fn new(config: ClientConfig) -> Pool {
        Pool {
            config,
            channels: Mutex::new(HashMap::new()),
            turn: AtomicUsize::new(0),
        }
    }

    /// One of `address`'s channels, in turn; opened on first use.
    pub(crate) fn channel(&self, address: SocketAddr) -> Result<Channel> {
        let mut channels = self.channels.lock().expect("pool lock");
        let channels = match channels.get(&address) {
            Some(open) => open,
            None => {
                let open = (0..self.config.connections_per_node.get())
                    .map(|_| self.open(address))
                    .collect::<Result<Vec<_>>>()?;
                channels.entry(address).or_insert(open)
            }
        };
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        Ok(channels[turn % channels.len()].clone())
    }

    fn open(&self, address: SocketAddr) -> Result<Channel> {
        let scheme = if self.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let invalid = |source| ClientError::Endpoint { address, source };
        let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
            .map_err(invalid)?
            .connect_timeout(self.config.connect_timeout)
            .tcp_nodelay(true);
        if let Some(tls) = &self.config.tls {
            endpoint = endpoint.tls_config(tls.clone()).map_err(invalid)?;
        }
        Ok(endpoint.connect_lazy())
    }

    /// Drops the channels of every address not in `keep`.
    pub(crate) fn retain(&self, keep: &[SocketAddr]) {
        self.channels
            .lock()
            .expect("pool lock")
            .retain(|address, _| keep.contains(address));
    }

    fn transport(&self, address: SocketAddr) -> Result<Transport> {
        Ok(InterceptedService::new(
            self.channel(address)?,
            self.config.credentials.clone(),
        ))
    }

    /// The `Client` service of `address`.
    pub(crate) fn client(&self, address: SocketAddr) -> Result<ClientClient<Transport>> {
        let limit = self.config.max_message_bytes;
        Ok(ClientClient::new(self.transport(address)?)
            .max_decoding_message_size(limit)
            .max_encoding_message_size(limit))
    }

    /// The `Admin` service of `address`.
    pub(crate) fn admin(&self, address: SocketAddr) -> Result<AdminClient<Transport>> {
        let limit = self.config.max_message_bytes;
        Ok(AdminClient::new(self.transport(address)?).max_decoding_message_size(limit))
    }

    /// The `Schema` service of `address`.
    pub(crate) fn schema(&self, address: SocketAddr) -> Result<SchemaClient<Transport>> {
        let limit = self.config.max_message_bytes;
        Ok(SchemaClient::new(self.transport(address)?).max_decoding_message_size(limit))
    }
}
