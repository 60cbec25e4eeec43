//! Internode gRPC clients, one lazily connected channel per peer address.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use ringstore_proto::v1::internode_client::InternodeClient;
use tonic::transport::{Channel, Endpoint};

/// The clients of every peer this node has talked to.
#[derive(Default)]
pub struct Peers {
    /// Held only to look up or insert a client, never across an await.
    clients: Mutex<HashMap<SocketAddr, InternodeClient<Channel>>>,
}

impl Peers {
    /// A client for the peer at `addr` (cheap to clone; connects on first use
    /// and reconnects after failures).
    pub fn client(&self, addr: SocketAddr) -> InternodeClient<Channel> {
        let mut clients = self.clients.lock().expect("peer clients lock");
        clients
            .entry(addr)
            .or_insert_with(|| {
                let endpoint = Endpoint::from_shared(format!("http://{addr}"))
                    .expect("a socket address is a valid URI")
                    .connect_timeout(Duration::from_secs(2))
                    .tcp_nodelay(true);
                InternodeClient::new(endpoint.connect_lazy())
                    .max_decoding_message_size(64 * 1024 * 1024)
                    .max_encoding_message_size(64 * 1024 * 1024)
            })
            .clone()
    }
}
