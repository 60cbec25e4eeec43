//! Internode gRPC clients, one lazily connected channel per peer address,
//! each call signed with the cluster secret when the node has one.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringstore_proto::v1::internode_client::InternodeClient;
use tonic::transport::Endpoint;

use crate::internode_auth::{CallSigner, SignedChannel};

/// An internode client: its calls carry this node's proof.
pub type PeerClient = InternodeClient<SignedChannel>;

/// The clients of every peer this node has talked to.
#[derive(Default)]
pub struct Peers {
    /// Signs every call (none without a cluster secret).
    signer: Option<Arc<CallSigner>>,
    /// Held only to look up or insert a client, never across an await.
    clients: Mutex<HashMap<SocketAddr, PeerClient>>,
}

impl Peers {
    /// Peers whose calls are signed by `signer`, if any.
    pub fn new(signer: Option<CallSigner>) -> Peers {
        Peers {
            signer: signer.map(Arc::new),
            clients: Mutex::default(),
        }
    }

    /// A client for the peer at `addr` (cheap to clone; connects on first use
    /// and reconnects after failures).
    pub fn client(&self, addr: SocketAddr) -> PeerClient {
        let mut clients = self.clients.lock().expect("peer clients lock");
        clients
            .entry(addr)
            .or_insert_with(|| {
                let endpoint = Endpoint::from_shared(format!("http://{addr}"))
                    .expect("a socket address is a valid URI")
                    .connect_timeout(Duration::from_secs(2))
                    .tcp_nodelay(true);
                let channel = SignedChannel::new(endpoint.connect_lazy(), self.signer.clone());
                InternodeClient::new(channel)
                    .max_decoding_message_size(64 * 1024 * 1024)
                    .max_encoding_message_size(64 * 1024 * 1024)
            })
            .clone()
    }
}
