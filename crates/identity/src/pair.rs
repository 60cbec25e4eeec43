//! The key two nodes share for authenticating the calls between them.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use ringstore_placement::HostId;
use sha2::Sha256;

use crate::keys::PublicKeys;

/// What a pairwise key is derived with.
const PAIR_LABEL: &[u8] = b"ringstore pairwise key v1";

/// An HMAC-SHA256 key only two nodes can compute. Its `Debug` hides it.
#[derive(Clone)]
pub struct PairKey {
    mac: Hmac<Sha256>,
}

impl PairKey {
    /// The key of an agreement's `shared` secret between `a` and `b` (in
    /// either order: both sides derive the same key).
    pub(crate) fn derive(
        shared: &[u8; 32],
        a: (HostId, &PublicKeys),
        b: (HostId, &PublicKeys),
    ) -> PairKey {
        let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
        let mut derive = Hmac::<Sha256>::new_from_slice(shared).expect("HMAC takes any key length");
        derive.update(PAIR_LABEL);
        for (host, keys) in [first, second] {
            derive.update(host.0.as_bytes());
            derive.update(&keys.signing);
            derive.update(&keys.agreement);
        }
        let key = derive.finalize().into_bytes();
        PairKey {
            mac: Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length"),
        }
    }

    /// A MAC keyed with this key, ready for input.
    pub fn mac(&self) -> Hmac<Sha256> {
        self.mac.clone()
    }
}

impl fmt::Debug for PairKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PairKey(..)")
    }
}

#[cfg(test)]
mod tests {
    use hmac::Mac;

    use crate::NodeKeys;

    fn tag(key: &super::PairKey) -> Vec<u8> {
        let mut mac = key.mac();
        mac.update(b"call");
        mac.finalize().into_bytes().to_vec()
    }

    #[test]
    fn both_sides_derive_the_same_key_and_a_third_node_another() {
        let (a, b, c) = (
            NodeKeys::for_test(1),
            NodeKeys::for_test(2),
            NodeKeys::for_test(3),
        );
        let ab = a.pair_key(a.host_id(), b.host_id(), &b.public()).unwrap();
        let ba = b.pair_key(b.host_id(), a.host_id(), &a.public()).unwrap();
        assert_eq!(tag(&ab), tag(&ba));
        let cb = c.pair_key(c.host_id(), b.host_id(), &b.public()).unwrap();
        assert_ne!(tag(&ab), tag(&cb));
        // Claiming to be a while holding c's key gives yet another key.
        let posing = c.pair_key(a.host_id(), b.host_id(), &b.public()).unwrap();
        assert_ne!(tag(&ab), tag(&posing));
    }

    #[test]
    fn a_low_order_public_key_gives_no_pair_key() {
        let a = NodeKeys::for_test(1);
        let zero = crate::PublicKeys::default();
        assert!(a.pair_key(a.host_id(), zero.host_id(), &zero).is_none());
    }
}
