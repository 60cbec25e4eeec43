//! Client authentication on the wire (`authenticator = "password"`): a
//! tower layer in front of every client-port service ([`ClientAuthLayer`])
//! reads the user name and password from the request's metadata, checks
//! them against the users in the replicated `system_auth` keyspace
//! ([`store`]) through a short-lived cache, finds the keyspace the request
//! names, and refuses with `UNAUTHENTICATED` or `PERMISSION_DENIED` before
//! any service sees it. The decisions themselves (the RPC table, grants,
//! hashes, the cache) are the sans-IO `ringstore-client-auth` crate; this module
//! reads the clock, the store and the request, and counts and logs refusals.
//!
//! The layer wraps the whole client port, so an RPC added later is covered
//! without a line of code here: until `ringstore-client-auth`'s table names it,
//! only superusers may call it.
//!
//! With `authenticator = "allow_all"` (the default) the layer is a
//! pass-through and the `Users` service manages users without checks, so
//! users can be created before the authenticator is switched on.
//!
//! The store and the bootstrap take the node as an [`AuthHost`]
//! (`host.rs`): what they need of it, and nothing more.

mod body;
mod bootstrap;
pub(crate) mod config;
mod flights;
mod gate;
mod host;
mod layer;
mod refused;
pub mod store;
mod stream;

pub use bootstrap::run as bootstrap;
pub use config::{AuthConfig, Authenticator};
pub use gate::{Gate, GateHost};
pub use host::AuthHost;
pub use layer::{ClientAuthLayer, Guarded};
pub use refused::Refused;
pub use stream::StreamAuth;

/// The metadata keys of the credentials, defined with the wire schema so
/// clients that do not link the node (`ringstore-client`) agree on them.
pub use ringstore_proto::{PASSWORD_HEADER, USER_HEADER};

#[cfg(test)]
mod tests {
    use ringstore_client_auth::in_table;

    /// Every RPC of every client-port service in `proto/`, as gRPC paths.
    fn client_port_rpcs() -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto/ringstore/v1");
        let mut paths = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let mut service = None;
            for line in text.lines().map(str::trim) {
                if let Some(rest) = line.strip_prefix("service ") {
                    service = rest.split_whitespace().next().map(str::to_string);
                } else if let (Some(rest), Some(service)) = (line.strip_prefix("rpc "), &service)
                    && service != "Internode"
                {
                    let method = rest.split('(').next().unwrap().trim();
                    paths.push(format!("/ringstore.v1.{service}/{method}"));
                }
            }
        }
        paths
    }

    #[test]
    fn every_client_port_rpc_in_the_protos_has_a_rule() {
        let paths = client_port_rpcs();
        assert!(paths.len() > 40, "{paths:?}");
        let unclassified: Vec<&String> = paths.iter().filter(|path| !in_table(path)).collect();
        assert!(
            unclassified.is_empty(),
            "add these RPCs to ringstore-client-auth's table: {unclassified:?}"
        );
    }
}
