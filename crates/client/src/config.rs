//! [`ClientConfig`]: where the cluster is, how to reach it, and how the
//! client routes, times out and retries. [`Credentials`]: the user every
//! request carries.

use std::num::NonZeroUsize;
use std::time::Duration;

use tonic::metadata::{AsciiMetadataValue, BinaryMetadataValue};
use tonic::service::Interceptor;
use tonic::transport::ClientTlsConfig;

use crate::error::{ClientError, Result};
use crate::retry::RetryPolicy;

/// How a [`Client`](crate::Client) connects and behaves. Build one with
/// [`ClientConfig::new`] and change the fields that differ.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Client addresses (`HOST:PORT`) of nodes to learn the cluster from,
    /// tried in order; at least one. After that the client dials the
    /// addresses the nodes advertise, seeds or not.
    pub seeds: Vec<String>,
    /// The data center whose nodes are preferred. `None`: the data center
    /// of the first seed that answers.
    pub local_dc: Option<String>,
    /// Which nodes requests go to.
    pub routing: Routing,
    /// How long one attempt of a request may take before it counts as
    /// timed out (and, if idempotent, is retried elsewhere). Above the
    /// nodes' own read timeout (5 s) so their answer comes first.
    pub request_timeout: Duration,
    /// How long connecting to a node may take.
    pub connect_timeout: Duration,
    /// How often the ring and schema are learned again without a reason;
    /// failures that suggest a change (a node unreachable or refusing, an
    /// unknown keyspace) trigger a refresh at once, at most every
    /// [`ClientConfig::min_refresh_gap`].
    pub refresh_interval: Duration,
    /// The least time between two refreshes triggered by failures.
    pub min_refresh_gap: Duration,
    /// How long a node the client failed to reach (refused, connection
    /// broken) goes to the end of every plan, before the cluster's failure
    /// detector may have noticed.
    pub suspect_for: Duration,
    /// HTTP/2 connections per node; requests take them in turn. One
    /// connection multiplexes many requests; more spread the work of a
    /// heavily loaded client over more of the node's connection tasks.
    pub connections_per_node: NonZeroUsize,
    /// Which failures are retried, and how many attempts in all.
    pub retry: RetryPolicy,
    /// Give every put, delete and batch mutation without a timestamp one
    /// from the client's clock (strictly increasing), which makes it
    /// idempotent and so safe to retry. Off: the coordinator stamps it, and
    /// such a write is retried only if it never reached a node.
    pub client_timestamps: bool,
    /// TLS towards every node; `None`: plaintext.
    pub tls: Option<ClientTlsConfig>,
    /// The user and password every request carries.
    pub credentials: Credentials,
    /// Token ranges a [`scan`](crate::Client::scan) reads at once.
    pub scan_parallelism: NonZeroUsize,
    /// The largest message sent or accepted, in bytes.
    pub max_message_bytes: usize,
}

impl ClientConfig {
    /// A configuration for `seeds` with the defaults: token-aware, a 12 s
    /// request timeout, a 5 s connect timeout, a refresh every 5 s (and on
    /// suspicious failures, at most every 100 ms), nodes not reached put
    /// last for 2 s, one connection per
    /// node, three attempts, client timestamps, plaintext, no credentials,
    /// four ranges at once in a scan, 64 MiB messages.
    pub fn new(seeds: impl IntoIterator<Item = impl Into<String>>) -> ClientConfig {
        ClientConfig {
            seeds: seeds.into_iter().map(Into::into).collect(),
            local_dc: None,
            routing: Routing::TokenAware,
            request_timeout: Duration::from_secs(12),
            connect_timeout: Duration::from_secs(5),
            refresh_interval: Duration::from_secs(5),
            min_refresh_gap: Duration::from_millis(100),
            suspect_for: Duration::from_secs(2),
            connections_per_node: NonZeroUsize::MIN,
            retry: RetryPolicy::default(),
            client_timestamps: true,
            tls: None,
            credentials: Credentials::default(),
            scan_parallelism: NonZeroUsize::new(4).expect("4 is not zero"),
            max_message_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Which nodes a client sends requests to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// To a replica of the request's key, local data center first, in turn:
    /// the coordinator then has one fewer replica to reach over the
    /// network. Falls back to the other nodes when the replicas fail.
    TokenAware,
    /// To every node in turn, local data center first, whatever the key;
    /// the coordinator forwards to the replicas.
    RoundRobin,
    /// Only to the seeds, in the order given, as `cqlsh` sends everything to
    /// its host: the seed coordinates. The cluster is not learned (no ring
    /// or schema requests, no refresh task); `scan` reads the whole ring
    /// from the seed in one piece.
    SeedsOnly,
}

/// The user name and password every request carries, in gRPC metadata
/// (`x-ringstore-user`, `x-ringstore-password-bin`); the default carries
/// none. Both are marked sensitive, so HTTP/2 header compression never
/// indexes them; `Debug` does not show them.
#[derive(Clone, Default)]
pub struct Credentials {
    user: Option<AsciiMetadataValue>,
    password: Option<BinaryMetadataValue>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(..)")
    }
}

impl Credentials {
    /// From a user name (ASCII letters, digits and `_ - . @`) and a
    /// password (any text). A name that cannot travel in metadata is refused.
    pub fn new(user: Option<&str>, password: Option<&str>) -> Result<Credentials> {
        let user = match user {
            None => None,
            Some(user) => {
                let mut value = AsciiMetadataValue::try_from(user).map_err(|_| {
                    ClientError::InvalidRequest(
                        "a user name must be letters, digits and _ - . @".into(),
                    )
                })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let password = password.map(|password| {
            let mut value = BinaryMetadataValue::from_bytes(password.as_bytes());
            value.set_sensitive(true);
            value
        });
        Ok(Credentials { user, password })
    }
}

impl Interceptor for Credentials {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(user) = &self.user {
            request
                .metadata_mut()
                .insert(ringstore_proto::USER_HEADER, user.clone());
        }
        if let Some(password) = &self.password {
            request
                .metadata_mut()
                .insert_bin(ringstore_proto::PASSWORD_HEADER, password.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_travel_in_metadata_and_a_bad_user_name_is_refused() {
        let mut credentials = Credentials::new(Some("alice"), Some("pässword")).unwrap();
        let request = credentials.call(tonic::Request::new(())).unwrap();
        let metadata = request.metadata();
        assert_eq!(metadata.get(ringstore_proto::USER_HEADER).unwrap(), "alice");
        let password = metadata.get_bin(ringstore_proto::PASSWORD_HEADER).unwrap();
        assert_eq!(password.to_bytes().unwrap().as_ref(), "pässword".as_bytes());
        let error = Credentials::new(Some("al\nice"), None).unwrap_err();
        assert!(error.to_string().contains("user name"), "{error}");
        assert_eq!(format!("{credentials:?}"), "Credentials(..)");
    }
}
