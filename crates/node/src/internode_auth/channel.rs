//! The calling side: a channel that adds a fresh proof to every request and
//! seals every message of its body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use ringstore_internode_auth::{MessageSealer, Nonce, PROOF_HEADER, Proof};
use tonic::body::Body;
use tonic::transport::Channel;
use tonic::transport::channel::ResponseFuture;
use tower::Service;

use super::body::SealedBody;
use super::directory::PeerDirectory;
use super::now_ms;

/// A gRPC channel to the peer at one internode address whose every request
/// carries a proof when the node signs its calls. A peer the directory does
/// not know (yet) gets its calls unsigned, and refuses them.
#[derive(Clone)]
pub struct SignedChannel {
    channel: Channel,
    address: SocketAddr,
    signer: Option<Arc<PeerDirectory>>,
    /// One strong count per clone alive: see [`SignedChannel::holders`].
    holders: Arc<()>,
}

impl SignedChannel {
    /// `channel` to the peer at `address`, signing with `signer`'s keys
    /// (none: requests go unsigned).
    pub fn new(
        channel: Channel,
        address: SocketAddr,
        signer: Option<Arc<PeerDirectory>>,
    ) -> SignedChannel {
        SignedChannel {
            channel,
            address,
            signer,
            holders: Arc::new(()),
        }
    }

    /// Counts this channel's clones alive (`Weak::strong_count`): a cache
    /// holding one sees whether anyone else still does.
    pub fn holders(&self) -> std::sync::Weak<()> {
        Arc::downgrade(&self.holders)
    }
}

impl Service<http::Request<Body>> for SignedChannel {
    type Response = http::Response<Body>;
    type Error = tonic::transport::Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Service::poll_ready(&mut self.channel, cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let Some(directory) = &self.signer else {
            return Service::call(&mut self.channel, request);
        };
        let Some((callee, key)) = directory.callee_key(self.address) else {
            tracing::debug!(peer = %self.address, "no member known at this address: the call goes unsigned");
            return Service::call(&mut self.channel, request);
        };
        let nonce = Nonce(rand::random());
        let proof = Proof::sign(
            &key,
            request.uri().path(),
            directory.local(),
            callee,
            now_ms(),
            nonce,
        );
        let value =
            http::HeaderValue::from_str(&proof.to_text()).expect("a proof is ASCII hex and digits");
        let mut request =
            request.map(|body| Body::new(SealedBody::new(body, MessageSealer::new(key, nonce))));
        request.headers_mut().insert(PROOF_HEADER, value);
        Service::call(&mut self.channel, request)
    }
}
