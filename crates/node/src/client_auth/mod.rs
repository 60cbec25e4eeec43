//! Client authentication on the wire (`authenticator = "password"`): a
//! tower layer in front of every client-port service ([`ClientAuthLayer`])
//! reads the user name and password from the request's metadata, checks
//! them against the users in the replicated `system_auth` keyspace
//! ([`store`]) through a short-lived cache, finds the keyspace the request
//! names, and refuses with `UNAUTHENTICATED` or `PERMISSION_DENIED` before
//! any service sees it. The decisions themselves (the RPC table, grants,
//! hashes, the cache) are the sans-IO `ringstore-access` crate; this module
//! reads the clock, the store and the request, and counts and logs refusals.
//!
//! The layer wraps the whole client port, so an RPC added later is covered
//! without a line of code here: until `ringstore-access`'s table names it,
//! only superusers may call it.
//!
//! With `authenticator = "allow_all"` (the default) the layer is a
//! pass-through and the `Users` service manages users without checks, so
//! users can be created before the authenticator is switched on.

mod body;
mod bootstrap;
mod config;
mod gate;
mod layer;
pub mod store;

pub use bootstrap::run as bootstrap;
pub use config::{AuthConfig, Authenticator};
pub use gate::Gate;
pub use layer::{ClientAuthLayer, Guarded};

/// The metadata key of the user name (ASCII).
pub const USER_HEADER: &str = "x-ringstore-user";
/// The metadata key of the password (binary metadata: any bytes; sent
/// marked sensitive so HTTP/2 header compression does not index it).
pub const PASSWORD_HEADER: &str = "x-ringstore-password-bin";
