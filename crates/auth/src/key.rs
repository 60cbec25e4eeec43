//! The key internode proofs are made with, derived from the cluster secret.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// What the internode key is derived with, so it differs from the gossip key.
const KEY_LABEL: &[u8] = b"ringstore internode rpc key v1";

/// The HMAC key of internode proofs. Its `Debug` hides the value.
#[derive(Clone)]
pub struct InternodeKey {
    mac: Hmac<Sha256>,
}

impl InternodeKey {
    /// The key of cluster secret `secret`; `None` for an empty secret.
    pub fn from_secret(secret: &[u8]) -> Option<InternodeKey> {
        if secret.is_empty() {
            return None;
        }
        let mut derive = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
        derive.update(KEY_LABEL);
        let key = derive.finalize().into_bytes();
        Some(InternodeKey {
            mac: Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length"),
        })
    }

    /// A MAC keyed with this key, ready for input.
    pub(crate) fn mac(&self) -> Hmac<Sha256> {
        self.mac.clone()
    }
}

impl fmt::Debug for InternodeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InternodeKey(..)")
    }
}
