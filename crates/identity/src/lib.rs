//! A node's own identity: the key pair it makes at its first start, the
//! host id that follows from it, the signatures it puts on what it says
//! about itself, and the pairwise keys that authenticate its calls.
//!
//! # Why
//! A cluster secret proves membership, not identity: every holder of it
//! could speak for every node, a removed node included (it keeps the
//! secret). Cassandra's and ScyllaDB's gossip trust every member the same
//! way. Here each node holds a key nobody else has, so what a node says
//! about itself can only come from it, and whatever one node says about
//! another is signed by the node that says it.
//!
//! # Design
//! - **Two key pairs per node** ([`NodeKeys`]), made at the first start and
//!   kept in `<data_dir>/identity.key` (mode 0600, [`key_file`]): an
//!   Ed25519 key that signs the node's gossip records, and an X25519 key
//!   for key agreement. Their public halves ([`PublicKeys`]) travel in the
//!   node's signed metadata.
//! - **The host id is derived from the public keys** ([`PublicKeys::host_id`]):
//!   the first 16 bytes of a SHA-256 over them, as a version-8 UUID. A
//!   record that names a derived host id is accepted only with the keys it
//!   was derived from and their signature, so nobody can speak for that
//!   host id without its private key, and a node that loses its key file
//!   can only come back as a new node. Nodes made before identities
//!   existed keep their random (version-4) host ids; theirs are *bound* to
//!   the first keys seen with them ([`Binding`]).
//! - **Pairwise keys** ([`NodeKeys::pair_key`]): two members derive the same
//!   HMAC key from an X25519 agreement of one's private and the other's
//!   public key, labelled with both host ids and both public keys. Only
//!   those two nodes can compute it, so an internode call authenticated
//!   with it proves both who calls and whom it is for, at the price of an
//!   HMAC per call (a signature would cost ~50 µs to check; the agreement
//!   is done once per peer and cached by the caller).
//!
//! # Invariants
//! - A private key never leaves [`NodeKeys`]; its `Debug` hides it, and the
//!   key file is written atomically with mode 0600 before it is used.
//! - [`PublicKeys::verify`] checks strictly (`verify_strict`): no weak keys,
//!   no malleable signatures.
//! - A pairwise key from a non-contributory agreement (a low-order public
//!   key) is refused, never all zeros.
//!
//! # Caveats
//! - Keys do not expire or rotate: a node whose key is compromised is
//!   removed (`removenode`) and comes back as a new node with a new key.
//! - The key file is as secret as the data directory it sits in; anyone
//!   who can read it can be that node.

#![deny(missing_docs)]

mod binding;
mod error;
pub mod key_file;
mod keys;
mod pair;

pub use binding::Binding;
pub use error::IdentityError;
pub use keys::{NodeKeys, PublicKeys, SIGNATURE_LEN, Signature, is_derived};
pub use pair::PairKey;
