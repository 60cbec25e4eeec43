//! The receiving side: a tower layer in front of the internode service.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use ringstore_internode_auth::{Admitted, PROOF_HEADER, Refusal, Verifier};
use ringstore_placement::HostId;
use tonic::Status;
use tonic::body::Body;
use tower::{Layer, Service};

use super::body::OpenedBody;
use super::directory::{PeerDirectory, departed};
use super::now_ms;

/// How long a call from a caller gossip has not brought yet waits for it:
/// a node that just joined calls at once, and its record reaches the
/// others within a few network delays (an anti-entropy round at worst).
const UNKNOWN_CALLER_WAIT: Duration = Duration::from_secs(2);
/// The most calls from unknown callers waiting at once; past it they are
/// refused at once (a flood of made-up host ids holds no more).
const MAX_UNKNOWN_WAITING: usize = 64;

/// Checks every call's proof before the service sees it, and every message
/// of its body as the service reads it; a pass-through when the node has
/// no cluster secret.
#[derive(Clone)]
pub struct InternodeAuthLayer {
    gate: Option<Arc<Gate>>,
}

impl InternodeAuthLayer {
    /// Refuses calls without a proof `verifier` accepts from a member
    /// `directory` knows and has not removed.
    pub fn new(verifier: Verifier, directory: Arc<PeerDirectory>) -> InternodeAuthLayer {
        InternodeAuthLayer {
            gate: Some(Arc::new(Gate {
                verifier: Mutex::new(verifier),
                directory,
                refused: AtomicU64::new(0),
                waiting: AtomicUsize::new(0),
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

/// The verifier and the directory a call is checked against.
struct Gate {
    /// Held only to verify one proof, never across an await.
    verifier: Mutex<Verifier>,
    directory: Arc<PeerDirectory>,
    /// Calls refused since start.
    refused: AtomicU64,
    /// Calls from unknown callers waiting for gossip now.
    waiting: AtomicUsize,
}

impl Gate {
    /// Checks `proof` for a call to `method`.
    fn admit(&self, method: &str, proof: Option<&str>) -> Result<Admitted, Refusal> {
        self.verifier
            .lock()
            .expect("verifier lock")
            .verify(method, proof, now_ms(), |caller| {
                self.directory.caller_key(caller)
            })
    }

    /// Checks `proof`, waiting a little for gossip to bring an unknown
    /// caller (see [`UNKNOWN_CALLER_WAIT`]).
    async fn admit_waiting(&self, method: &str, proof: Option<&str>) -> Result<Admitted, Refusal> {
        let first = self.admit(method, proof);
        if !matches!(first, Err(Refusal::UnknownCaller(_))) {
            return first;
        }
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= MAX_UNKNOWN_WAITING {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return first;
        }
        let deadline = tokio::time::Instant::now() + UNKNOWN_CALLER_WAIT;
        let mut views = self.directory.membership().watch_view();
        let outcome = loop {
            views.borrow_and_update();
            let outcome = self.admit(method, proof);
            if !matches!(outcome, Err(Refusal::UnknownCaller(_))) {
                break outcome;
            }
            match tokio::time::timeout_at(deadline, views.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => break outcome,
            }
        };
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        outcome
    }

    /// Logs a refusal: the 1st, 2nd, 4th, 8th… so a flood cannot flood the log.
    fn log(&self, refusal: &Refusal, method: &str) {
        let count = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if count.is_power_of_two() {
            tracing::warn!(%refusal, method, refused_so_far = count, "internode call refused");
        }
    }
}

/// The caller of an admitted call, as the layer leaves it in the request's
/// extensions: a long-lived stream checks at each message that its caller
/// is still a member ([`Caller::admitted`]), since the layer saw only its
/// opening (each message's tag proves who sent it, not that it still may).
#[derive(Clone)]
pub struct Caller {
    host: HostId,
    gate: Arc<Gate>,
}

impl Caller {
    /// Whether the caller may still call: refused, as the layer would
    /// refuse a new call, once it has left the cluster.
    pub fn admitted(&self) -> Result<(), Status> {
        if departed(&self.gate.directory.membership().view(), self.host) {
            return Err(refusal_status(&Refusal::NotMember(self.host)));
        }
        Ok(())
    }
}

/// The metadata key a refusal of a departed caller carries, so that a node
/// others claim to have removed can tell "you are not a member" from other
/// refusals ([`is_not_member`]).
const REFUSAL_HEADER: &str = "ringstore-refusal";
const NOT_MEMBER: &str = "not-member";

/// The `UNAUTHENTICATED` status of `refusal`.
fn refusal_status(refusal: &Refusal) -> Status {
    let mut status = Status::unauthenticated(refusal.to_string());
    if matches!(refusal, Refusal::NotMember(_)) {
        status.metadata_mut().insert(
            REFUSAL_HEADER,
            tonic::metadata::MetadataValue::from_static(NOT_MEMBER),
        );
    }
    status
}

/// Whether `status` is a peer's refusal of this node as not (or no longer)
/// a member of the cluster.
pub fn is_not_member(status: &Status) -> bool {
    status.code() == tonic::Code::Unauthenticated
        && status
            .metadata()
            .get(REFUSAL_HEADER)
            .is_some_and(|v| v == NOT_MEMBER)
}

/// A service behind [`InternodeAuthLayer`].
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    gate: Option<Arc<Gate>>,
}

impl<S> Service<http::Request<Body>> for Authenticated<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<http::Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let Some(gate) = self.gate.clone() else {
            return Box::pin(self.inner.call(request));
        };
        // The service that was made ready is the one to call; a clone
        // takes its place for the next call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let method = request.uri().path().to_string();
            let proof = match request.headers().get(PROOF_HEADER).map(|v| v.to_str()) {
                None => None,
                Some(Ok(text)) => Some(text.to_string()),
                Some(Err(_)) => {
                    let refusal = Refusal::Malformed("not text");
                    gate.log(&refusal, &method);
                    return Ok(Status::unauthenticated(refusal.to_string()).into_http());
                }
            };
            match gate.admit_waiting(&method, proof.as_deref()).await {
                Ok(Admitted { caller, messages }) => {
                    let mut request =
                        request.map(|body| Body::new(OpenedBody::new(body, messages)));
                    request.extensions_mut().insert(Caller {
                        host: caller,
                        gate: Arc::clone(&gate),
                    });
                    inner.call(request).await
                }
                Err(refusal) => {
                    gate.log(&refusal, &method);
                    Ok(refusal_status(&refusal).into_http())
                }
            }
        })
    }
}
