//! The key pairs, their public halves, host id derivation and signatures.

use std::fmt;

use ed25519_dalek::{Signer, SigningKey, VerifyingKey};
use ringstore_placement::HostId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use x25519_dalek::StaticSecret;

use crate::pair::PairKey;

/// Bytes of a signature.
pub const SIGNATURE_LEN: usize = 64;

/// A signature by a node's signing key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature(pub [u8; SIGNATURE_LEN]);

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature({:02x}{:02x}..)", self.0[0], self.0[1])
    }
}

/// What a host id is derived with, so the hash is never confused with another.
const HOST_ID_LABEL: &[u8] = b"ringstore host id v1";

/// A node's public keys, as gossip carries them in its metadata.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PublicKeys {
    /// The Ed25519 key its records are signed with.
    pub signing: [u8; 32],
    /// The X25519 key its pairwise keys are agreed with.
    pub agreement: [u8; 32],
}

impl fmt::Debug for PublicKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PublicKeys({:02x}{:02x}{:02x}{:02x}..)",
            self.signing[0], self.signing[1], self.signing[2], self.signing[3]
        )
    }
}

impl PublicKeys {
    /// The host id these keys make: 16 bytes of SHA-256 over a label and
    /// both keys, as a version-8 (custom) UUID.
    pub fn host_id(&self) -> HostId {
        let mut hash = Sha256::new();
        hash.update(HOST_ID_LABEL);
        hash.update(self.signing);
        hash.update(self.agreement);
        let digest = hash.finalize();
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        HostId(uuid::Builder::from_custom_bytes(bytes).into_uuid())
    }

    /// Whether `host` was derived from these keys.
    pub fn made(&self, host: HostId) -> bool {
        self.host_id() == host
    }

    /// Whether `signature` is these keys' signature of `message` (strict
    /// verification: weak keys and malleable signatures are refused).
    pub fn verify(&self, message: &[u8], signature: &Signature) -> bool {
        let Ok(key) = VerifyingKey::from_bytes(&self.signing) else {
            return false;
        };
        let signature = ed25519_dalek::Signature::from_bytes(&signature.0);
        key.verify_strict(message, &signature).is_ok()
    }
}

/// Whether `host` is a derived host id (version 8) rather than a random one
/// from before identities (version 4): only a derived id proves its keys.
pub fn is_derived(host: HostId) -> bool {
    host.0.get_version_num() == 8
}

/// A node's private keys. Cheap to share behind an `Arc`; its `Debug`
/// shows only the host id.
pub struct NodeKeys {
    signing: SigningKey,
    agreement: StaticSecret,
    public: PublicKeys,
}

impl NodeKeys {
    /// New random keys.
    pub fn generate() -> NodeKeys {
        NodeKeys::from_seeds(rand::random(), rand::random())
    }

    /// The keys of two 32-byte seeds (what the key file holds; a test's
    /// fixed seeds give a fixed identity).
    pub fn from_seeds(signing: [u8; 32], agreement: [u8; 32]) -> NodeKeys {
        let signing = SigningKey::from_bytes(&signing);
        let agreement = StaticSecret::from(agreement);
        let public = PublicKeys {
            signing: signing.verifying_key().to_bytes(),
            agreement: x25519_dalek::PublicKey::from(&agreement).to_bytes(),
        };
        NodeKeys {
            signing,
            agreement,
            public,
        }
    }

    /// Deterministic keys for test node `n` of a simulation.
    pub fn for_test(n: u64) -> NodeKeys {
        let mut signing = [0u8; 32];
        signing[..8].copy_from_slice(&n.to_le_bytes());
        let mut agreement = signing;
        agreement[31] = 0xa5;
        NodeKeys::from_seeds(signing, agreement)
    }

    /// The seeds, for the key file only.
    pub(crate) fn seeds(&self) -> ([u8; 32], [u8; 32]) {
        (self.signing.to_bytes(), self.agreement.to_bytes())
    }

    /// The public halves.
    pub fn public(&self) -> PublicKeys {
        self.public
    }

    /// The host id the keys make (see [`PublicKeys::host_id`]).
    pub fn host_id(&self) -> HostId {
        self.public.host_id()
    }

    /// Signs `message`.
    pub fn sign(&self, message: &[u8]) -> Signature {
        Signature(self.signing.sign(message).to_bytes())
    }

    /// The key this node (`local`) shares with node `peer`, whose public
    /// keys are `theirs`; `None` if `theirs` is not a usable key (a
    /// low-order point). Both sides compute the same key.
    pub fn pair_key(&self, local: HostId, peer: HostId, theirs: &PublicKeys) -> Option<PairKey> {
        let shared = self
            .agreement
            .diffie_hellman(&x25519_dalek::PublicKey::from(theirs.agreement));
        if !shared.was_contributory() {
            return None;
        }
        Some(PairKey::derive(
            shared.as_bytes(),
            (local, &self.public),
            (peer, theirs),
        ))
    }
}

impl fmt::Debug for NodeKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeKeys({})", self.host_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_id_is_derived_from_the_keys_and_marked_as_such() {
        let keys = NodeKeys::for_test(1);
        let host = keys.host_id();
        assert!(is_derived(host));
        assert!(keys.public().made(host));
        assert!(!NodeKeys::for_test(2).public().made(host));
        assert!(!is_derived(HostId::random()));
        assert_eq!(NodeKeys::for_test(1).host_id(), host, "deterministic");
    }

    #[test]
    fn a_signature_verifies_only_for_its_message_and_key() {
        let keys = NodeKeys::generate();
        let signature = keys.sign(b"tokens 1 2 3");
        assert!(keys.public().verify(b"tokens 1 2 3", &signature));
        assert!(!keys.public().verify(b"tokens 1 2 4", &signature));
        assert!(
            !NodeKeys::generate()
                .public()
                .verify(b"tokens 1 2 3", &signature)
        );
        let mut bent = signature;
        bent.0[10] ^= 1;
        assert!(!keys.public().verify(b"tokens 1 2 3", &bent));
        assert!(!PublicKeys::default().verify(b"tokens 1 2 3", &signature));
    }

    #[test]
    fn the_debug_output_shows_no_private_key() {
        let keys = NodeKeys::for_test(7);
        let (signing, _) = keys.seeds();
        let shown = format!("{keys:?}");
        assert!(shown.contains(&keys.host_id().to_string()));
        let hex: String = signing.iter().map(|b| format!("{b:02x}")).collect();
        assert!(!shown.contains(&hex[..8]), "{shown}");
    }
}
