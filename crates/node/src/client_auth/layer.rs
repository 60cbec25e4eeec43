//! The tower layer in front of the client port.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Full, Limited};
use ringstore_client_auth::{Principal, is_password_change, rule_for};
use tonic::body::Body;
use tonic::metadata::MetadataMap;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tower::{Layer, Service};

use super::body::keyspace_in;
use super::gate::Gate;
use super::refused::Refused;
use super::{PASSWORD_HEADER, USER_HEADER};

/// The largest request body buffered to find its keyspace (the client
/// port's message limit).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Authenticates and authorizes every client-port request before the
/// services see it; a pass-through with `authenticator = "allow_all"`.
#[derive(Clone)]
pub struct ClientAuthLayer {
    gate: Option<Arc<Gate>>,
}

impl ClientAuthLayer {
    /// Checks every request with `gate`.
    pub fn new(gate: Arc<Gate>) -> ClientAuthLayer {
        ClientAuthLayer { gate: Some(gate) }
    }

    /// Lets every request through.
    pub fn open() -> ClientAuthLayer {
        ClientAuthLayer { gate: None }
    }
}

impl<S> Layer<S> for ClientAuthLayer {
    type Service = Guarded<S>;

    fn layer(&self, inner: S) -> Guarded<S> {
        Guarded {
            inner,
            gate: self.gate.clone(),
        }
    }
}

/// A service behind [`ClientAuthLayer`]. An admitted request carries its
/// [`Principal`] in its extensions.
#[derive(Clone)]
pub struct Guarded<S> {
    inner: S,
    gate: Option<Arc<Gate>>,
}

type Response = http::Response<Body>;

impl<S> Service<http::Request<Body>> for Guarded<S>
where
    S: Service<http::Request<Body>, Response = Response> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        // The clone that was polled ready serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let Some(gate) = self.gate.clone() else {
            return Box::pin(inner.call(request));
        };
        Box::pin(async move {
            match admit(&gate, request).await {
                Ok(request) => inner.call(request).await,
                Err(refused) => {
                    if let Some(reason) = refused.reason() {
                        gate.metrics().auth_refused(reason);
                    }
                    Ok(refused.status().into_http())
                }
            }
        })
    }
}

/// The request, with its principal, if its credentials and permissions
/// allow it.
async fn admit(
    gate: &Gate,
    mut request: http::Request<Body>,
) -> Result<http::Request<Body>, Refused> {
    let (user, password) = credentials(request.headers_mut());
    let principal = gate.authenticate(peer_ip(&request), user, password).await?;
    let path = request.uri().path().to_string();
    let rule = rule_for(&path);
    let (mut request, keyspace) = match rule.keyspace_field() {
        None => (request, None),
        Some(field) => {
            let (parts, body) = request.into_parts();
            let bytes = Limited::new(body, MAX_BODY_BYTES)
                .collect()
                .await
                .map_err(|_| Refused::Malformed("request body unreadable or too large".into()))?
                .to_bytes();
            let keyspace =
                keyspace_in(&bytes, field).map_err(|e| Refused::Malformed(e.to_string()))?;
            let body = Body::new(Full::new(bytes));
            (http::Request::from_parts(parts, body), keyspace)
        }
    };
    principal
        .check(&rule.need(keyspace.as_deref()), is_password_change(&path))
        .map_err(Refused::Denied)?;
    request.extensions_mut().insert::<Principal>(principal);
    Ok(request)
}

/// The IP address the request came from: tonic puts the connection's
/// address in every request's extensions, before any layer.
fn peer_ip(request: &http::Request<Body>) -> Option<std::net::IpAddr> {
    let extensions = request.extensions();
    extensions
        .get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            extensions
                .get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|info| info.get_ref().remote_addr())
        })
        .map(|address| address.ip())
}

/// The user name and password of a request; the password header is taken
/// out, so nothing behind the layer can log it.
fn credentials(headers: &mut http::HeaderMap) -> (Option<String>, Option<String>) {
    let user = headers
        .get(USER_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let password = headers.remove(PASSWORD_HEADER).and_then(|value| {
        let mut only = http::HeaderMap::new();
        only.insert(PASSWORD_HEADER, value);
        let metadata = MetadataMap::from_headers(only);
        let bytes = metadata.get_bin(PASSWORD_HEADER)?.to_bytes().ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    });
    (user, password)
}
