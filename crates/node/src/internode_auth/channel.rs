//! The calling side: a channel that adds a fresh proof to every request.

use std::sync::Arc;
use std::task::{Context, Poll};

use ringstore_auth::{InternodeKey, Nonce, PROOF_HEADER, Proof};
use ringstore_placement::HostId;
use tonic::body::Body;
use tonic::transport::Channel;
use tonic::transport::channel::ResponseFuture;
use tower::Service;

use super::now_ms;

/// Who signs this node's calls, and with what.
#[derive(Debug)]
pub struct CallSigner {
    key: InternodeKey,
    caller: HostId,
}

impl CallSigner {
    /// Signs as node `caller` with `key`.
    pub fn new(key: InternodeKey, caller: HostId) -> CallSigner {
        CallSigner { key, caller }
    }

    fn proof_for(&self, method: &str) -> String {
        Proof::sign(
            &self.key,
            method,
            self.caller,
            now_ms(),
            Nonce(rand::random()),
        )
        .to_text()
    }
}

/// A gRPC channel whose every request carries a proof when a signer is set.
#[derive(Clone)]
pub struct SignedChannel {
    channel: Channel,
    signer: Option<Arc<CallSigner>>,
}

impl SignedChannel {
    /// `channel`, signing with `signer` (none: requests go unsigned).
    pub fn new(channel: Channel, signer: Option<Arc<CallSigner>>) -> SignedChannel {
        SignedChannel { channel, signer }
    }
}

impl Service<http::Request<Body>> for SignedChannel {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::poll_ready(&mut self.channel, cx)
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        if let Some(signer) = &self.signer {
            let proof = signer.proof_for(request.uri().path());
            let value =
                http::HeaderValue::from_str(&proof).expect("a proof is ASCII hex and digits");
            request.headers_mut().insert(PROOF_HEADER, value);
        }
        Service::call(&mut self.channel, request)
    }
}
