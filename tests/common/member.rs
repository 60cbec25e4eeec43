//! Speaking on the internode port as a member does (issue 40), with a
//! node's own keys read from its data directory, so a test can make a
//! member's calls — and bend them as an attacker who captured them would.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use ringstore_identity::{NodeKeys, PairKey, key_file};
use ringstore_internode_auth::{MessageSealer, Nonce, PROOF_HEADER, Proof};
use ringstore_node::internode_auth::{PeerDirectory, SignedChannel};
use ringstore_placement::HostId;
use ringstore_proto::v1::internode_client::InternodeClient;
use tokio::net::TcpStream;
use tonic::Code;
use tonic::codegen::http;
use tonic::transport::Channel;

use super::TestCluster;

/// A node's identity, as a caller on the internode port.
pub struct Member {
    /// The host id it claims.
    pub host: HostId,
    keys: Arc<NodeKeys>,
    /// Whose membership view it reads addresses and keys from.
    via: usize,
}

/// One call as a member makes it: its proof and its sealed body.
#[derive(Clone)]
pub struct Call {
    /// The proof header's value.
    pub proof: String,
    /// The sealed gRPC frames of its messages, in order.
    pub frames: Vec<Bytes>,
}

impl Member {
    /// Node `i` of `cluster`, with the keys in its data directory (reading
    /// another node's view, so it still works once node `i` is stopped).
    pub fn of(cluster: &TestCluster, i: usize) -> Member {
        let (keys, _) = key_file::load_or_create(&cluster.node_config(i).data_dir)
            .expect("the node's key file");
        Member {
            host: cluster.context(i).host_id,
            keys: Arc::new(keys),
            via: if i == 0 { 1 } else { 0 },
        }
    }

    /// A node outside the cluster (keys of its own, which nobody knows),
    /// reading the view of node `via`.
    pub fn stranger(via: usize) -> Member {
        let keys = NodeKeys::generate();
        Member {
            host: keys.host_id(),
            keys: Arc::new(keys),
            via,
        }
    }

    /// The same keys, claiming to be `host`.
    pub fn posing_as(mut self, host: HostId) -> Member {
        self.host = host;
        self
    }

    /// An internode client of node `j` whose calls this member signs and
    /// seals, as a node does.
    pub fn client(&self, cluster: &TestCluster, j: usize) -> InternodeClient<SignedChannel> {
        let address = cluster.node_config(j).internode_address;
        let directory = PeerDirectory::new(
            self.keys.clone(),
            self.host,
            cluster.context(self.via).membership().clone(),
        );
        let channel = Channel::from_shared(format!("http://{address}"))
            .unwrap()
            .connect_lazy();
        InternodeClient::new(SignedChannel::new(
            channel,
            address,
            Some(Arc::new(directory)),
        ))
    }

    /// The key this member shares with node `j` (computed with its own
    /// keys, whatever host id it claims).
    pub fn key_with(&self, cluster: &TestCluster, j: usize) -> PairKey {
        let callee = cluster.context(j).host_id;
        let keys = cluster
            .context(self.via)
            .view()
            .member(callee)
            .expect("the callee is known")
            .metadata
            .keys;
        self.keys
            .pair_key(self.host, callee, &keys)
            .expect("usable keys")
    }

    /// The call to `method` of node `j` carrying `messages` (encoded
    /// protobuf), signed and sealed now.
    pub fn call(
        &self,
        cluster: &TestCluster,
        j: usize,
        method: &str,
        messages: &[Vec<u8>],
    ) -> Call {
        let key = self.key_with(cluster, j);
        let nonce = Nonce(rand::random());
        let proof = Proof::sign(
            &key,
            method,
            self.host,
            cluster.context(j).host_id,
            now_ms(),
            nonce,
        );
        let mut sealer = MessageSealer::new(key, nonce);
        Call {
            proof: proof.to_text(),
            frames: messages.iter().map(|m| sealer.seal(0, m)).collect(),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A plain (unsealed) gRPC frame of `message`.
pub fn plain_frame(message: &[u8]) -> Bytes {
    let mut frame = BytesMut::with_capacity(5 + message.len());
    frame.put_u8(0);
    frame.put_u32(message.len() as u32);
    frame.put_slice(message);
    frame.freeze()
}

/// What a raw call ended with: its gRPC status code and message, and the
/// messages it answered before (raw, undecoded).
#[derive(Debug)]
pub struct Ended {
    /// The status code (`None`: no status, the connection broke).
    pub code: Option<Code>,
    /// The status message.
    pub message: String,
    /// The body bytes received before the status.
    pub answered: Vec<u8>,
}

/// Sends `frames` as the body of a call to `path` at `address` over raw
/// HTTP/2, with `proof` as its proof header; what it ended with.
pub async fn send(address: SocketAddr, path: &str, proof: Option<&str>, frames: &[Bytes]) -> Ended {
    let tcp = TcpStream::connect(address).await.expect("connects");
    let (client, connection) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    let connection = tokio::spawn(connection);
    let body: Bytes = frames
        .iter()
        .flat_map(|f| f.to_vec())
        .collect::<Vec<u8>>()
        .into();
    let call = async move {
        let mut client = client.ready().await.expect("ready");
        let mut request = http::Request::post(format!("http://{address}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(proof) = proof {
            request = request.header(PROOF_HEADER, proof);
        }
        let (response, mut sender) = client
            .send_request(request.body(()).unwrap(), false)
            .expect("sends");
        let _ = sender.send_data(body, true);
        let response = response.await.expect("a response");
        let status = |headers: &http::HeaderMap| {
            let code = headers
                .get("grpc-status")
                .and_then(|v| v.to_str().ok()?.parse::<i32>().ok())
                .map(Code::from);
            let message = headers
                .get("grpc-message")
                .and_then(|v| v.to_str().ok())
                .map(percent_decode)
                .unwrap_or_default();
            (code, message)
        };
        let (code, message) = status(response.headers());
        if code.is_some() {
            return Ended {
                code,
                message,
                answered: Vec::new(),
            };
        }
        let mut body = response.into_body();
        let mut answered = Vec::new();
        while let Some(Ok(data)) = body.data().await {
            let _ = body.flow_control().release_capacity(data.len());
            answered.extend_from_slice(&data);
        }
        let (code, message) = match body.trailers().await {
            Ok(Some(trailers)) => status(&trailers),
            _ => (None, String::new()),
        };
        Ended {
            code,
            message,
            answered,
        }
    };
    let ended = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ends");
    connection.abort();
    ended
}

/// gRPC's percent-encoding of status messages, undone.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
