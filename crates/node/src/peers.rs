//! Internode gRPC clients, one lazily connected channel per peer address,
//! each call signed with the cluster secret when the node has one.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringstore_proto::v1::internode_client::InternodeClient;
use tonic::transport::{ClientTlsConfig, Endpoint};

use crate::internode_auth::{CallSigner, SignedChannel};

/// What went wrong with an internode call, for the log: the status message
/// and, for a failure in the transport (refused connection, TLS handshake),
/// its innermost cause, which says what the message ("transport error") does not.
pub fn describe(status: &tonic::Status) -> String {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    let mut innermost = None;
    while let Some(error) = cause {
        innermost = Some(error);
        cause = error.source();
    }
    match innermost {
        Some(root) => format!("{}: {root}", status.message()),
        None => status.message().to_string(),
    }
}

/// An internode client: its calls carry this node's proof.
pub type PeerClient = InternodeClient<SignedChannel>;

/// The clients of every peer this node has talked to.
#[derive(Default)]
pub struct Peers {
    /// Signs every call (none without a cluster secret).
    signer: Option<Arc<CallSigner>>,
    /// TLS for every channel (none: plaintext).
    tls: Option<ClientTlsConfig>,
    /// Held only to look up or insert a client, never across an await.
    clients: Mutex<HashMap<SocketAddr, PeerClient>>,
}

impl Peers {
    /// Peers whose calls are signed by `signer`, if any, over TLS
    /// configured by `tls`, if any (checked already: it builds).
    pub fn new(signer: Option<CallSigner>, tls: Option<ClientTlsConfig>) -> Peers {
        Peers {
            signer: signer.map(Arc::new),
            tls,
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
                let scheme = if self.tls.is_some() { "https" } else { "http" };
                let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
                    .expect("a socket address is a valid URI")
                    .connect_timeout(Duration::from_secs(2))
                    .tcp_nodelay(true);
                if let Some(tls) = &self.tls {
                    endpoint = endpoint
                        .tls_config(tls.clone())
                        .expect("the TLS settings were checked at start");
                }
                let channel = SignedChannel::new(endpoint.connect_lazy(), self.signer.clone());
                InternodeClient::new(channel)
                    .max_decoding_message_size(64 * 1024 * 1024)
                    .max_encoding_message_size(64 * 1024 * 1024)
            })
            .clone()
    }
}
