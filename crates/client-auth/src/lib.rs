//! Client authentication and authorization: who is calling the client
//! port, and may they do what they ask?
//!
//! `ringstore-internode-auth` proves that an *internode* call comes from
//! the member it names; this crate decides about *clients* (people and
//! applications) once a node runs with `authenticator = "password"`.
//! Everything here is sans-IO: records, hashes, the RPC table and the
//! decision are plain values; the node reads the records from the
//! replicated `system_auth` keyspace, passes the clock, and moves metadata.
//!
//! # Model
//!
//! - A **user** ([`UserRecord`]) has a name, an Argon2id hash of its
//!   password with a random salt ([`StoredHash`]), a superuser flag, and
//!   **grants**: a [`Permission`] (`read`, `write`, `schema`, `admin`) on a
//!   [`Scope`] (one keyspace, or all keyspaces). A superuser holds every
//!   permission everywhere.
//! - Every client-port RPC has a [`Rule`] ([`rule_for`] its gRPC path):
//!   a login only (views of the cluster such as `status`, `ring`, `info`),
//!   or a permission on the keyspace the request names (an empty keyspace,
//!   or none, means all keyspaces). An RPC missing from the table is for
//!   superusers only, so a new RPC is closed until it is classified.
//! - [`Principal::check`] decides, and a refusal ([`Denied`]) names the
//!   user, the permission and the keyspace.
//! - The data of [`AUTH_KEYSPACE`] (password hashes) is for superusers
//!   only: a grant on all keyspaces covers it for `admin` only (repair,
//!   snapshot), and no one is granted anything on it by name.
//!
//! # Stored form
//!
//! `system_auth` holds one key per user (`user/<name>`, a versioned JSON
//! [`UserRecord`]) and the index of names (`users`), read and written at
//! `QUORUM`. A change of a user is a read-modify-write of its one key, so
//! two changes of one user at the same instant through different nodes:
//! the later timestamp wins whole (there are no lightweight transactions).
//!
//! # The default superuser
//!
//! A node with the password authenticator that finds no user index writes
//! the default superuser `cassandra` with password `cassandra`, as
//! Cassandra does. Every node writes the *same bytes* (a fixed salt; the
//! password is public anyway) at the *same timestamp*
//! ([`BOOTSTRAP_TIMESTAMP_MICROS`], 1 µs), so nodes starting at once for
//! the first time cannot create conflicting superusers, and any later real
//! change (a new password, a drop) carries a real timestamp and wins over
//! the bootstrap write wherever and whenever it lands. While its password
//! is the default, the default superuser may change that password and
//! nothing else (not even create a user: a superuser created with the
//! public password at hand would outlive the change): a fresh cluster
//! serves nothing until an operator changes it.
//!
//! # Verification and caching
//!
//! [`verify`] takes the same time whether or not the user exists (an
//! unknown user is checked against a dummy hash of the same cost). Argon2
//! costs tens of milliseconds by design, so each node keeps a
//! [`CredentialCache`]: a record read less than `validity_ms` ago is used
//! without reading it again, and a password that verified against it is
//! remembered as a keyed digest (never in clear) of the name, the hash it
//! verified against and the password, so the next request with it costs a
//! hash, not an Argon2 check, and a record read again with the same hash
//! needs no check either. A change made through a node invalidates that
//! node's entry at once; other nodes see it within the validity (2 s by
//! default, as Cassandra's `roles_validity`). The cache keeps verified
//! users and never-verified names (an attacker's inventions) in two
//! bounded LRU segments, so a spray of names cannot evict a user.
//!
//! # Login throttling
//!
//! Before a login may spend a check, [`LoginThrottle`] limits failed
//! logins per source address and per user name, and the checks pending on
//! a node; over a limit a login is refused at once, except that a source
//! that logged in as that user before may still pass with a password the
//! cache knows (see `throttle.rs` for the limits and their caveats).
//!
//! # Caveats
//!
//! - Credentials travel in every request's metadata: use client TLS, or
//!   they cross the network in clear.
//! - Revoking a grant or dropping a user takes up to the validity to reach
//!   every node; a request already admitted runs to its end.
//! - Concurrent changes of one user through different nodes are last
//!   writer wins (see *Stored form*).
//! - No roles (users granted to users), no per-key permissions, no
//!   permission on user management finer than `admin` on all keyspaces.

#![deny(missing_docs)]

mod cache;
mod decision;
mod error;
mod lru;
mod password;
mod permission;
mod rpc;
mod throttle;
mod user;

pub use cache::{CACHE_CAPACITY, Cached, CredentialCache};
pub use decision::{Denied, Principal};
pub use error::AccessError;
pub use password::{MAX_PASSWORD_BYTES, StoredHash, check_password, verify};
pub use permission::{AUTH_KEYSPACE, Grant, Permission, Scope};
pub use rpc::{KeyspaceField, Need, Rule, in_table, is_password_change, rule_for};
pub use throttle::{Admission, CheckOutcome, Limit, LoginLimits, LoginThrottle, Source, Throttled};
pub use user::{
    BOOTSTRAP_TIMESTAMP_MICROS, DEFAULT_PASSWORD, DEFAULT_SUPERUSER, USER_INDEX_KEY, UserName,
    UserRecord, decode_index, encode_index,
};
