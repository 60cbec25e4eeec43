//! The receiving side: a tower layer in front of the internode service.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::{Either, Ready, ready};
use ringstore_auth::{PROOF_HEADER, Refusal, Verifier};
use ringstore_membership::{ClusterView, MembershipHandle, NodeState};
use ringstore_placement::HostId;
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
    /// The caller `request`'s proof names, if it may call.
    fn admit<B>(&self, request: &http::Request<B>) -> Result<HostId, Refusal> {
        let header = match request.headers().get(PROOF_HEADER) {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| Refusal::Malformed("not text"))?),
        };
        let caller = self.verifier.lock().expect("verifier lock").verify(
            request.uri().path(),
            header,
            now_ms(),
        )?;
        if departed(&self.membership.view(), caller) {
            return Err(Refusal::NotMember(caller.to_string()));
        }
        Ok(caller)
    }

    /// Logs a refusal: the 1st, 2nd, 4th, 8th… so a flood cannot flood the log.
    fn log(&self, refusal: &Refusal, method: &str) {
        let count = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        if count.is_power_of_two() {
            tracing::warn!(%refusal, method, refused_so_far = count, "internode call refused");
        }
    }
}

/// Whether `caller` has left the cluster (decommissioned) or was removed or
/// replaced, as `view` says. A caller the view does not know yet is let in:
/// a fresh node may call before its gossip has reached this one.
fn departed(view: &ClusterView, caller: HostId) -> bool {
    view.removed.contains(&caller)
        || view
            .member(caller)
            .is_some_and(|m| m.metadata.state == NodeState::Left)
}

/// The caller of an admitted call, as the layer leaves it in the request's
/// extensions: a long-lived stream checks at each message that its caller
/// is still a member ([`Caller::admitted`]), since the layer saw only its
/// opening.
#[derive(Clone)]
pub struct Caller {
    host: HostId,
    gate: Arc<Gate>,
}

impl Caller {
    /// Whether the caller may still call: refused, as the layer would
    /// refuse a new call, once it has left the cluster.
    pub fn admitted(&self) -> Result<(), Status> {
        if departed(&self.gate.membership.view(), self.host) {
            return Err(Status::unauthenticated(
                Refusal::NotMember(self.host.to_string()).to_string(),
            ));
        }
        Ok(())
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

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Some(gate) = &self.gate {
            match gate.admit(&request) {
                Ok(host) => {
                    let gate = Arc::clone(gate);
                    request.extensions_mut().insert(Caller { host, gate });
                }
                Err(refusal) => {
                    gate.log(&refusal, request.uri().path());
                    let status = Status::unauthenticated(refusal.to_string());
                    return Either::Right(ready(Ok(status.into_http())));
                }
            }
        }
        Either::Left(self.inner.call(request))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use ringstore_membership::{
        Generation, Liveness, MemberInfo, MetadataStamp, NodeMetadata, Takeovers,
    };
    use ringstore_placement::Ring;

    use super::*;

    fn member(host: u128, state: NodeState) -> (HostId, MemberInfo) {
        let metadata = NodeMetadata {
            host_id: HostId::from_u128(host),
            stamp: MetadataStamp {
                generation: Generation(1),
                version: 1,
            },
            cluster_name: "test".into(),
            dc: "dc1".into(),
            rack: "rack1".into(),
            client_addr: "127.0.0.1:7100".parse().unwrap(),
            internode_addr: "127.0.0.1:7101".parse().unwrap(),
            gossip_addr: "127.0.0.1:7000".parse().unwrap(),
            tokens: Vec::new(),
            state,
            load_bytes: 0,
            schema_version: uuid::Uuid::nil(),
            software_version: "0.1.0".into(),
            takeovers: Takeovers::default(),
        };
        let info = MemberInfo {
            metadata: Arc::new(metadata),
            liveness: Liveness::Up,
        };
        (HostId::from_u128(host), info)
    }

    #[test]
    fn departed_and_removed_callers_are_not_members_but_newcomers_are_let_in() {
        let view = ClusterView {
            local: HostId::from_u128(1),
            members: BTreeMap::from([
                member(1, NodeState::Normal),
                member(2, NodeState::Joining),
                member(3, NodeState::Leaving),
                member(4, NodeState::Left),
            ]),
            ring: Arc::new(Ring::empty(0)),
            joining: BTreeMap::new(),
            pending_ring: None,
            removed: BTreeSet::from([HostId::from_u128(5)]),
        };
        for (host, gone) in [
            (1, false),
            (2, false),
            (3, false),
            (4, true),
            (5, true),
            (6, false),
        ] {
            assert_eq!(
                departed(&view, HostId::from_u128(host)),
                gone,
                "host {host}"
            );
        }
    }
}
