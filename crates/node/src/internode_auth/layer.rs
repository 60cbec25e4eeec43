//! The receiving side: a tower layer in front of the internode service.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::{Either, Ready, ready};
use ringstore_auth::{PROOF_HEADER, Refusal, Verifier};
use ringstore_membership::{MembershipHandle, NodeState};
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

use super::now_ms;

/// Checks every call's proof before the service sees it; a pass-through
/// when the node has no cluster secret.
#[derive(Clone)]
pub struct InternodeAuthLayer {
    gate: Option<Arc<Gate>>,
}

impl InternodeAuthLayer {
    /// Refuses calls without a proof `verifier` accepts, or from a caller
    /// `membership` says has left the cluster.
    pub fn new(verifier: Verifier, membership: MembershipHandle) -> InternodeAuthLayer {
        InternodeAuthLayer {
            gate: Some(Arc::new(Gate {
                verifier: Mutex::new(verifier),
                membership,
                refused: AtomicU64::new(0),
            })),
        }
    }

    /// Lets every call through (no cluster secret).
    pub fn open() -> InternodeAuthLayer {
        InternodeAuthLayer { gate: None }
    }
}

impl<S> Layer<S> for InternodeAuthLayer {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Authenticated<S> {
        Authenticated {
            inner,
            gate: self.gate.clone(),
        }
    }
}

/// The verifier and the membership a call is checked against.
struct Gate {
    /// Held only to verify one proof, never across an await.
    verifier: Mutex<Verifier>,
    membership: MembershipHandle,
    /// Calls refused since start.
    refused: AtomicU64,
}

impl Gate {
    fn admit<B>(&self, request: &http::Request<B>) -> Result<(), Refusal> {
        let header = match request.headers().get(PROOF_HEADER) {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| Refusal::Malformed("not text"))?),
        };
        let caller = self.verifier.lock().expect("verifier lock").verify(
            request.uri().path(),
            header,
            now_ms(),
        )?;
        let view = self.membership.view();
        let departed = view
            .member(caller)
            .is_some_and(|m| m.metadata.state == NodeState::Left);
        if departed || view.removed.contains(&caller) {
            return Err(Refusal::NotMember(caller.to_string()));
        }
        Ok(())
    }

    /// Logs a refusal: the 1st, 2nd, 4th, 8th… so a flood cannot flood the log.
    fn log(&self, refusal: &Refusal, method: &str) {
        let count = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if count.is_power_of_two() {
            tracing::warn!(%refusal, method, refused_so_far = count, "internode call refused");
        }
    }
}

/// A service behind [`InternodeAuthLayer`].
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    gate: Option<Arc<Gate>>,
}

impl<S, B> Service<http::Request<B>> for Authenticated<S>
where
    S: Service<http::Request<B>, Response = http::Response<Body>>,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<http::Response<Body>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if let Some(gate) = &self.gate
            && let Err(refusal) = gate.admit(&request)
        {
            gate.log(&refusal, request.uri().path());
            let status = Status::unauthenticated(refusal.to_string());
            return Either::Right(ready(Ok(status.into_http())));
        }
        Either::Left(self.inner.call(request))
    }
}
