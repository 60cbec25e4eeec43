//! The receiving side: parse, check the tag, the clock and the replay cache.

use ringstore_placement::HostId;

use crate::error::Refusal;
use crate::key::InternodeKey;
use crate::proof::Proof;
use crate::replay::ReplayCache;

/// How far a proof's issue time may be from the receiver's clock, either way.
pub const DEFAULT_MAX_SKEW_MS: u64 = 60_000;
/// How many proofs the replay cache remembers (about 64 MiB at most): at
/// 8,000 calls a second every proof stays for the whole skew window.
pub const DEFAULT_REPLAY_CAPACITY: usize = 1 << 20;

/// Checks the proofs of incoming internode calls for one node.
#[derive(Debug)]
pub struct Verifier {
    key: InternodeKey,
    max_skew_ms: u64,
    replays: ReplayCache,
}

impl Verifier {
    /// A verifier of proofs made with `key`, issued within `max_skew_ms` of
    /// the receiver's clock, remembering up to `replay_capacity` of them.
    pub fn new(key: InternodeKey, max_skew_ms: u64, replay_capacity: usize) -> Verifier {
        Verifier {
            key,
            max_skew_ms,
            // An entry lives exactly as long as its proof passes the clock check.
            replays: ReplayCache::new(replay_capacity, max_skew_ms),
        }
    }

    /// Checks the proof text `header` (absent: [`Refusal::Missing`]) of a
    /// call to `method` received at `now_ms`; the caller it names.
    pub fn verify(
        &mut self,
        method: &str,
        header: Option<&str>,
        now_ms: u64,
    ) -> Result<HostId, Refusal> {
        let proof = Proof::parse(header.ok_or(Refusal::Missing)?)?;
        // The tag first: only holders of the key may touch the replay cache.
        if !proof.verifies(&self.key, method) {
            return Err(Refusal::BadTag);
        }
        let skew_ms = proof.issued_at_ms.abs_diff(now_ms);
        if skew_ms > self.max_skew_ms {
            return Err(Refusal::Skewed {
                skew_ms,
                max_skew_ms: self.max_skew_ms,
            });
        }
        self.replays
            .check_and_insert(proof.issued_at_ms, proof.nonce, now_ms)?;
        Ok(proof.caller)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::Nonce;

    const PUSH: &str = "/ringstore.v1.Internode/PushSchema";

    fn key(secret: &str) -> InternodeKey {
        InternodeKey::from_secret(secret.as_bytes()).unwrap()
    }

    fn signed(secret: &str, method: &str, at: u64, n: u8) -> String {
        Proof::sign(
            &key(secret),
            method,
            HostId::from_u128(5),
            at,
            Nonce([n; 16]),
        )
        .to_text()
    }

    fn verifier() -> Verifier {
        Verifier::new(key("s"), 1_000, 100)
    }

    #[test]
    fn a_fresh_proof_names_its_caller() {
        let mut v = verifier();
        assert_eq!(
            v.verify(PUSH, Some(&signed("s", PUSH, 10_000, 1)), 10_500),
            Ok(HostId::from_u128(5))
        );
    }

    #[test]
    fn missing_wrong_and_replayed_proofs_are_refused() {
        let mut v = verifier();
        assert_eq!(v.verify(PUSH, None, 10_000), Err(Refusal::Missing));
        assert_eq!(
            v.verify(PUSH, Some(&signed("wrong", PUSH, 10_000, 1)), 10_000),
            Err(Refusal::BadTag)
        );
        let good = signed("s", PUSH, 10_000, 1);
        assert!(v.verify(PUSH, Some(&good), 10_000).is_ok());
        assert_eq!(v.verify(PUSH, Some(&good), 10_001), Err(Refusal::Replayed));
        // Still refused at the very edge of the skew window…
        assert_eq!(v.verify(PUSH, Some(&good), 11_000), Err(Refusal::Replayed));
        // …and past it by the clock check.
        assert!(matches!(
            v.verify(PUSH, Some(&good), 11_001),
            Err(Refusal::Skewed { .. })
        ));
    }

    #[test]
    fn a_proof_for_another_method_is_refused() {
        let mut v = verifier();
        let pull = signed("s", "/ringstore.v1.Internode/PullSchema", 10_000, 1);
        assert_eq!(v.verify(PUSH, Some(&pull), 10_000), Err(Refusal::BadTag));
    }

    #[test]
    fn proofs_from_the_past_or_future_beyond_the_skew_are_refused() {
        let mut v = verifier();
        for at in [8_999, 11_001] {
            assert_eq!(
                v.verify(PUSH, Some(&signed("s", PUSH, at, 1)), 10_000),
                Err(Refusal::Skewed {
                    skew_ms: 1_001,
                    max_skew_ms: 1_000
                })
            );
        }
        for at in [9_000, 11_000] {
            assert!(
                v.verify(PUSH, Some(&signed("s", PUSH, at, 2)), 10_000)
                    .is_ok()
            );
        }
    }

    #[test]
    fn a_bad_tag_never_fills_the_replay_cache() {
        let mut v = verifier();
        for n in 0..200 {
            let _ = v.verify(PUSH, Some(&signed("wrong", PUSH, 10_000, n)), 10_000);
        }
        assert!(v.replays.is_empty());
    }
}
