//! One call's proof: who calls whom, when, a nonce, and the tag over them
//! and the method; its text form in gRPC metadata.

use hmac::Mac;
use ringstore_identity::PairKey;
use ringstore_placement::HostId;

use crate::error::Refusal;

/// The gRPC metadata key that carries the proof.
pub const PROOF_HEADER: &str = "ringstore-internode-proof";
/// The tag's domain, so it can never be confused with another HMAC of `K`.
const DOMAIN: &[u8] = b"ringstore-internode-v2";
const VERSION: &str = "v2";
const TAG_LEN: usize = 32;
/// The longest proof text accepted (the real one is 202 bytes).
const MAX_TEXT_LEN: usize = 256;

/// 16 random bytes, never used twice by one caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nonce(pub [u8; 16]);

/// A tagged claim that `caller` makes a call to one method of `callee` at
/// `issued_at_ms`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proof {
    /// The calling node (as it claims; the tag proves it).
    pub caller: HostId,
    /// The node the call is for.
    pub callee: HostId,
    /// When it was made, in milliseconds since the Unix epoch (caller's clock).
    pub issued_at_ms: u64,
    /// Unique per call; it also binds the call's messages to it.
    pub nonce: Nonce,
    tag: [u8; TAG_LEN],
}

impl Proof {
    /// The proof for a call to `method` (the gRPC path) from `caller` to
    /// `callee`, with the key they share.
    pub fn sign(
        key: &PairKey,
        method: &str,
        caller: HostId,
        callee: HostId,
        issued_at_ms: u64,
        nonce: Nonce,
    ) -> Proof {
        let mut proof = Proof {
            caller,
            callee,
            issued_at_ms,
            nonce,
            tag: [0; TAG_LEN],
        };
        let mut mac = key.mac();
        proof.feed(&mut mac, method);
        proof.tag = mac.finalize().into_bytes().into();
        proof
    }

    /// Whether the tag is right for `method` under `key` (in constant time).
    pub fn verifies(&self, key: &PairKey, method: &str) -> bool {
        let mut mac = key.mac();
        self.feed(&mut mac, method);
        mac.verify_slice(&self.tag).is_ok()
    }

    /// The metadata value.
    pub fn to_text(&self) -> String {
        format!(
            "{VERSION}.{}.{}.{}.{}.{}",
            hex::encode(self.caller.0.as_bytes()),
            hex::encode(self.callee.0.as_bytes()),
            self.issued_at_ms,
            hex::encode(self.nonce.0),
            hex::encode(self.tag)
        )
    }

    /// Parses a metadata value; never panics, whatever the text.
    pub fn parse(text: &str) -> Result<Proof, Refusal> {
        if text.len() > MAX_TEXT_LEN {
            return Err(Refusal::Malformed("too long"));
        }
        let mut parts = text.split('.');
        let mut next = |what| parts.next().ok_or(Refusal::Malformed(what));
        if next("no version")? != VERSION {
            return Err(Refusal::Malformed("unknown version"));
        }
        let caller: [u8; 16] = hex_array(next("no caller")?, "caller is not 16 hex bytes")?;
        let callee: [u8; 16] = hex_array(next("no callee")?, "callee is not 16 hex bytes")?;
        let issued_at_ms = next("no time")?
            .parse::<u64>()
            .map_err(|_| Refusal::Malformed("time is not a number"))?;
        let nonce = hex_array(next("no nonce")?, "nonce is not 16 hex bytes")?;
        let tag = hex_array(next("no tag")?, "tag is not 32 hex bytes")?;
        if parts.next().is_some() {
            return Err(Refusal::Malformed("trailing fields"));
        }
        Ok(Proof {
            caller: HostId(uuid::Uuid::from_bytes(caller)),
            callee: HostId(uuid::Uuid::from_bytes(callee)),
            issued_at_ms,
            nonce: Nonce(nonce),
            tag,
        })
    }

    /// The signed bytes, each field fixed-length or length-prefixed so no
    /// two different calls feed the same bytes.
    fn feed(&self, mac: &mut impl Mac, method: &str) {
        mac.update(DOMAIN);
        mac.update(&(method.len() as u64).to_le_bytes());
        mac.update(method.as_bytes());
        mac.update(self.caller.0.as_bytes());
        mac.update(self.callee.0.as_bytes());
        mac.update(&self.issued_at_ms.to_le_bytes());
        mac.update(&self.nonce.0);
    }
}

fn hex_array<const N: usize>(text: &str, what: &'static str) -> Result<[u8; N], Refusal> {
    let mut out = [0u8; N];
    hex::decode_to_slice(text, &mut out).map_err(|_| Refusal::Malformed(what))?;
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use ringstore_identity::NodeKeys;

    pub(crate) const APPLY: &str = "/ringstore.v1.Internode/Apply";

    /// Nodes 1 and 2, and the key they share.
    pub(crate) fn pair() -> (HostId, HostId, PairKey) {
        let (a, b) = (NodeKeys::for_test(1), NodeKeys::for_test(2));
        let key = a.pair_key(a.host_id(), b.host_id(), &b.public()).unwrap();
        (a.host_id(), b.host_id(), key)
    }

    /// A key nobody else shares: node 3's with node 2.
    pub(crate) fn other_key() -> PairKey {
        let (c, b) = (NodeKeys::for_test(3), NodeKeys::for_test(2));
        c.pair_key(c.host_id(), b.host_id(), &b.public()).unwrap()
    }

    fn proof() -> Proof {
        let (a, b, key) = pair();
        Proof::sign(&key, APPLY, a, b, 1_000, Nonce([9; 16]))
    }

    #[test]
    fn a_proof_survives_its_text_form_and_verifies() {
        let text = proof().to_text();
        assert!(text.len() <= MAX_TEXT_LEN, "{}", text.len());
        let parsed = Proof::parse(&text).unwrap();
        assert_eq!(parsed, proof());
        assert!(parsed.verifies(&pair().2, APPLY));
    }

    #[test]
    fn another_key_or_method_does_not_verify() {
        assert!(!proof().verifies(&other_key(), APPLY));
        assert!(!proof().verifies(&pair().2, "/ringstore.v1.Internode/PushSchema"));
    }

    #[test]
    fn every_signed_field_is_covered() {
        let key = pair().2;
        let mut text = proof().to_text();
        // Change one character in each field but the version: none verifies.
        let dots: Vec<usize> = text.match_indices('.').map(|(i, _)| i).collect();
        assert_eq!(dots.len(), 5);
        for &dot in &dots {
            let i = dot + 1;
            let original = text.as_bytes()[i];
            let changed = if original == b'1' { b'2' } else { b'1' };
            text.replace_range(i..=i, std::str::from_utf8(&[changed]).unwrap());
            let parsed = Proof::parse(&text).unwrap();
            assert!(!parsed.verifies(&key, APPLY), "field at {i} is not signed");
            text.replace_range(i..=i, std::str::from_utf8(&[original]).unwrap());
        }
    }

    #[test]
    fn malformed_texts_are_refused_with_a_reason() {
        for bad in [
            "",
            "v1.00",
            "v2",
            "v2.zz.1.00.00",
            "v2.00000000000000000000000000000007.x.0909.00",
            &format!("{}.extra", proof().to_text()),
            &"v2.".repeat(100),
        ] {
            assert!(
                matches!(Proof::parse(bad), Err(Refusal::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn random_text_never_panics(text in ".{0,300}") {
            let _ = Proof::parse(&text);
        }
    }
}
