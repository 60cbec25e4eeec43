//! The receiving side: parse, check the destination, the caller, the tag,
//! the clock and the replay cache.

use ringstore_identity::PairKey;
use ringstore_placement::HostId;

use crate::error::Refusal;
use crate::messages::MessageOpener;
use crate::proof::Proof;
use crate::replay::ReplayCache;

/// How far a proof's issue time may be from the receiver's clock, either way.
pub const DEFAULT_MAX_SKEW_MS: u64 = 60_000;
/// How many proofs the replay cache remembers (about 64 MiB at most): at
/// 8,000 calls a second every proof stays for the whole skew window.
pub const DEFAULT_REPLAY_CAPACITY: usize = 1 << 20;

/// A call whose proof was accepted.
#[derive(Debug)]
pub struct Admitted {
    /// Who calls.
    pub caller: HostId,
    /// Checks the call's messages, in order.
    pub messages: MessageOpener,
}

/// Checks the proofs of incoming internode calls for one node.
#[derive(Debug)]
pub struct Verifier {
    local: HostId,
    max_skew_ms: u64,
    replays: ReplayCache,
}

impl Verifier {
    /// A verifier for node `local` of proofs issued within `max_skew_ms`
    /// of its clock, remembering up to `replay_capacity` of them.
    pub fn new(local: HostId, max_skew_ms: u64, replay_capacity: usize) -> Verifier {
        Verifier {
            local,
            max_skew_ms,
            // An entry lives exactly as long as its proof passes the clock check.
            replays: ReplayCache::new(replay_capacity, max_skew_ms),
        }
    }

    /// Parses the proof text `header` (absent: [`Refusal::Missing`]) of a
    /// call to `method` received at `now_ms`, and checks it for this node.
    /// `key_of` gives the key this node shares with the caller the proof
    /// names, or why it has none (not a member, or no longer).
    pub fn verify(
        &mut self,
        method: &str,
        header: Option<&str>,
        now_ms: u64,
        key_of: impl FnOnce(HostId) -> Result<PairKey, Refusal>,
    ) -> Result<Admitted, Refusal> {
        let proof = Proof::parse(header.ok_or(Refusal::Missing)?)?;
        if proof.callee != self.local {
            return Err(Refusal::WrongDestination {
                callee: proof.callee,
            });
        }
        let key = key_of(proof.caller)?;
        // The tag first: only the caller may touch the replay cache.
        if !proof.verifies(&key, method) {
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
        Ok(Admitted {
            caller: proof.caller,
            messages: MessageOpener::new(key, proof.nonce),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::Nonce;
    use crate::proof::tests::{other_key, pair};

    const PUSH: &str = "/ringstore.v1.Internode/PushSchema";

    fn signed(key: &PairKey, method: &str, callee: HostId, at: u64, n: u8) -> String {
        let (a, _, _) = pair();
        Proof::sign(key, method, a, callee, at, Nonce([n; 16])).to_text()
    }

    /// Node 2's verifier; node 1 is its only known member.
    fn verify(
        v: &mut Verifier,
        header: Option<&str>,
        method: &str,
        now: u64,
    ) -> Result<HostId, Refusal> {
        let (a, _, key) = pair();
        v.verify(method, header, now, |caller| {
            if caller == a {
                Ok(key)
            } else {
                Err(Refusal::UnknownCaller(caller))
            }
        })
        .map(|admitted| admitted.caller)
    }

    fn verifier() -> Verifier {
        Verifier::new(pair().1, 1_000, 100)
    }

    #[test]
    fn a_fresh_proof_names_its_caller() {
        let (a, b, key) = pair();
        let mut v = verifier();
        assert_eq!(
            verify(
                &mut v,
                Some(&signed(&key, PUSH, b, 10_000, 1)),
                PUSH,
                10_500
            ),
            Ok(a)
        );
    }

    #[test]
    fn missing_wrong_and_replayed_proofs_are_refused() {
        let (_, b, key) = pair();
        let mut v = verifier();
        assert_eq!(verify(&mut v, None, PUSH, 10_000), Err(Refusal::Missing));
        assert_eq!(
            verify(
                &mut v,
                Some(&signed(&other_key(), PUSH, b, 10_000, 1)),
                PUSH,
                10_000
            ),
            Err(Refusal::BadTag)
        );
        let good = signed(&key, PUSH, b, 10_000, 1);
        assert!(verify(&mut v, Some(&good), PUSH, 10_000).is_ok());
        assert_eq!(
            verify(&mut v, Some(&good), PUSH, 10_001),
            Err(Refusal::Replayed)
        );
        // Still refused at the very edge of the skew window…
        assert_eq!(
            verify(&mut v, Some(&good), PUSH, 11_000),
            Err(Refusal::Replayed)
        );
        // …and past it by the clock check.
        assert!(matches!(
            verify(&mut v, Some(&good), PUSH, 11_001),
            Err(Refusal::Skewed { .. })
        ));
    }

    #[test]
    fn a_proof_for_another_node_or_method_is_refused() {
        let (a, b, key) = pair();
        let mut v = verifier();
        let elsewhere = signed(&key, PUSH, a, 10_000, 1);
        assert_eq!(
            verify(&mut v, Some(&elsewhere), PUSH, 10_000),
            Err(Refusal::WrongDestination { callee: a })
        );
        let pull = signed(&key, "/ringstore.v1.Internode/PullSchema", b, 10_000, 2);
        assert_eq!(
            verify(&mut v, Some(&pull), PUSH, 10_000),
            Err(Refusal::BadTag)
        );
    }

    #[test]
    fn an_unknown_or_departed_caller_is_refused_before_its_tag_is_checked() {
        let (a, b, key) = pair();
        let mut v = verifier();
        let proof = signed(&key, PUSH, b, 10_000, 1);
        let refused = v.verify(PUSH, Some(&proof), 10_000, |caller| {
            Err(Refusal::NotMember(caller))
        });
        assert_eq!(refused.unwrap_err(), Refusal::NotMember(a));
        assert!(v.replays.is_empty());
    }

    #[test]
    fn proofs_from_the_past_or_future_beyond_the_skew_are_refused() {
        let (_, b, key) = pair();
        let mut v = verifier();
        for at in [8_999, 11_001] {
            assert_eq!(
                verify(&mut v, Some(&signed(&key, PUSH, b, at, 1)), PUSH, 10_000),
                Err(Refusal::Skewed {
                    skew_ms: 1_001,
                    max_skew_ms: 1_000
                })
            );
        }
        for at in [9_000, 11_000] {
            assert!(verify(&mut v, Some(&signed(&key, PUSH, b, at, 2)), PUSH, 10_000).is_ok());
        }
    }

    #[test]
    fn a_bad_tag_never_fills_the_replay_cache() {
        let (_, b, _) = pair();
        let mut v = verifier();
        for n in 0..200 {
            let _ = verify(
                &mut v,
                Some(&signed(&other_key(), PUSH, b, 10_000, n)),
                PUSH,
                10_000,
            );
        }
        assert!(v.replays.is_empty());
    }
}
