//! What a node remembers of the others across a restart: their signed
//! records and the claims it had accepted (see [`crate::claims`]).
//!
//! ```text
//! format 2: 0x02 | count (u32 LE) | count × (length (u32 LE) | record) | postcard(accepted claims)
//! format 1: 0x01 | (length (u32 LE) | unsigned record of format 2)*      (builds before identities)
//! ```
//!
//! A format-1 memory comes from a build that accepted every claim, so its
//! records' claims are remembered as accepted; its records have no
//! signature and are used locally only, until each member's own newer
//! record arrives. Anything that does not decode is an error, never a
//! silent empty memory (the node would start with a partial ring).

use crate::claims::{Claim, claims_of};
use crate::error::{MembershipError, Result};
use crate::metadata::SignedMetadata;

const FORMAT: u8 = 2;
const LEGACY_FORMAT: u8 = 1;

/// The records of the other members and the accepted claims.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remembrance {
    /// The newest record held of every other member.
    pub records: Vec<SignedMetadata>,
    /// The claims this node had accepted.
    pub claims: Vec<Claim>,
}

impl Remembrance {
    /// The bytes to save (an unsigned record, remembered from a build before
    /// identities, is saved in its old format until its member's newer one
    /// replaces it).
    pub fn encode(&self) -> Vec<u8> {
        let encoded: Vec<Vec<u8>> = self.records.iter().map(|r| r.encode_for_memory()).collect();
        let mut bytes = vec![FORMAT];
        bytes.extend_from_slice(&(encoded.len() as u32).to_le_bytes());
        for record in encoded {
            bytes.extend_from_slice(&(record.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&record);
        }
        bytes.extend(postcard::to_stdvec(&self.claims).expect("claims serialize"));
        bytes
    }

    /// Reads what [`Remembrance::encode`] wrote, or the format of builds
    /// from before identities.
    pub fn decode(bytes: &[u8]) -> Result<Remembrance> {
        let corrupt = |reason: &str| MembershipError::InvalidMetadata {
            reason: format!("saved members: {reason}"),
        };
        let (format, mut rest) = bytes.split_first().ok_or_else(|| corrupt("empty"))?;
        let next = |rest: &mut &[u8]| -> Result<Vec<u8>> {
            let (length, body) = rest
                .split_first_chunk::<4>()
                .ok_or_else(|| corrupt("truncated length"))?;
            let length = u32::from_le_bytes(*length) as usize;
            let record = body
                .get(..length)
                .ok_or_else(|| corrupt("truncated record"))?;
            *rest = &body[length..];
            Ok(record.to_vec())
        };
        match *format {
            FORMAT => {
                let (count, body) = rest
                    .split_first_chunk::<4>()
                    .ok_or_else(|| corrupt("truncated count"))?;
                rest = body;
                let mut records = Vec::new();
                for _ in 0..u32::from_le_bytes(*count) {
                    records.push(SignedMetadata::decode_remembered(&next(&mut rest)?)?);
                }
                let claims: Vec<Claim> =
                    postcard::from_bytes(rest).map_err(|_| corrupt("undecodable claims"))?;
                Ok(Remembrance { records, claims })
            }
            LEGACY_FORMAT => {
                let mut records = Vec::new();
                while !rest.is_empty() {
                    records.push(SignedMetadata::decode_remembered(&next(&mut rest)?)?);
                }
                let claims = records
                    .iter()
                    .flat_map(|r| claims_of(&r.metadata))
                    .collect();
                Ok(Remembrance { records, claims })
            }
            other => Err(corrupt(&format!("unknown format {other}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::ClaimKind;
    use crate::metadata::tests::{sample, signed_sample};
    use ringstore_placement::HostId;

    #[test]
    fn a_remembrance_reads_back_and_garbage_is_an_error() {
        let (_, a) = signed_sample(1, 3);
        let (_, b) = signed_sample(2, 3);
        let memory = Remembrance {
            records: vec![a, b],
            claims: vec![Claim {
                claimant: HostId::from_u128(1),
                subject: HostId::from_u128(2),
                kind: ClaimKind::Removed,
            }],
        };
        let bytes = memory.encode();
        assert_eq!(Remembrance::decode(&bytes).unwrap(), memory);
        for cut in [1, 3, 6, bytes.len() - 1] {
            assert!(Remembrance::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        assert!(Remembrance::decode(&[9]).is_err());
        assert!(Remembrance::decode(&[]).is_err());
    }

    #[test]
    fn a_memory_of_a_build_before_identities_keeps_its_claims() {
        let mut old = sample(2, 1);
        old.takeovers.removed = vec![HostId::from_u128(7)];
        let mut record = vec![2u8];
        record.extend(
            postcard::to_stdvec(&(
                old.host_id,
                old.stamp,
                &old.cluster_name,
                &old.dc,
                &old.rack,
                old.client_addr,
                old.internode_addr,
                old.gossip_addr,
                &old.tokens,
                old.state,
                old.load_bytes,
                old.schema_version,
                &old.software_version,
                &old.takeovers,
            ))
            .unwrap(),
        );
        let mut bytes = vec![LEGACY_FORMAT];
        bytes.extend_from_slice(&(record.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&record);
        let memory = Remembrance::decode(&bytes).unwrap();
        assert_eq!(*memory.records[0].metadata, old);
        assert_eq!(memory.claims.len(), 1);
        assert_eq!(memory.claims[0].subject, HostId::from_u128(7));
    }
}
