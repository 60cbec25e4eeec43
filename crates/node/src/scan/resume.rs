//! The resume token of a client scan: where the next page starts, as opaque
//! bytes the client hands back.
//!
//! Layout (version 1): `version (1) | kind (1) | token (8, big-endian) |
//! key (0 or 1 to 64 KiB) | CRC-32 of everything before (4, big-endian)`,
//! where kind 0 is "after every row of the token" (no key) and kind 1 is
//! "after the row (token, key)". The checksum turns a garbled or made-up
//! token into a clear `INVALID_ARGUMENT` instead of a scan that silently
//! starts elsewhere; the range check ([`decode`]) refuses a token from
//! another range.

use ringstore_placement::Token;
use ringstore_replication::{RowPosition, ScanPoint};

use crate::error::{NodeError, Result, ResumeTokenFault, ScanError};
use crate::limits::check_key;

const VERSION: u8 = 1;
const AFTER_TOKEN: u8 = 0;
const AFTER_ROW: u8 = 1;
const HEADER: usize = 10;
const CHECKSUM: usize = 4;

/// The resume token of `point`.
pub fn encode(point: &ScanPoint) -> Vec<u8> {
    let (kind, token, key): (u8, Token, &[u8]) = match point {
        ScanPoint::AfterToken(token) => (AFTER_TOKEN, *token, &[]),
        ScanPoint::AfterRow(row) => (AFTER_ROW, row.token, &row.key),
    };
    let mut bytes = Vec::with_capacity(HEADER + key.len() + CHECKSUM);
    bytes.push(VERSION);
    bytes.push(kind);
    bytes.extend_from_slice(&token.0.to_be_bytes());
    bytes.extend_from_slice(key);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

/// The point a resume token names, checked to lie within the scan's range
/// `(start, end]`: a point after `start`'s rows and before `end`'s last.
pub fn decode(bytes: &[u8], start: Token, end: Token) -> Result<ScanPoint> {
    let invalid = |fault: ResumeTokenFault| NodeError::from(ScanError::BadResumeToken(fault));
    let Some((body, crc)) = bytes.split_last_chunk::<CHECKSUM>() else {
        return Err(invalid(ResumeTokenFault::TooShort));
    };
    if body.len() < HEADER {
        return Err(invalid(ResumeTokenFault::TooShort));
    }
    if crc32fast::hash(body) != u32::from_be_bytes(*crc) {
        return Err(invalid(ResumeTokenFault::Checksum));
    }
    if body[0] != VERSION {
        return Err(invalid(ResumeTokenFault::UnknownVersion(body[0])));
    }
    let token = Token(i64::from_be_bytes(
        body[2..HEADER].try_into().expect("8 bytes"),
    ));
    let key = &body[HEADER..];
    let point = match body[1] {
        AFTER_TOKEN if key.is_empty() => ScanPoint::AfterToken(token),
        AFTER_ROW => {
            check_key(key).map_err(|_| invalid(ResumeTokenFault::BadKey))?;
            ScanPoint::AfterRow(RowPosition {
                token,
                key: key.to_vec(),
            })
        }
        _ => return Err(invalid(ResumeTokenFault::UnknownKind)),
    };
    let inside = match &point {
        ScanPoint::AfterToken(t) => start <= *t && *t < end,
        ScanPoint::AfterRow(row) => start < row.token && row.token <= end,
    };
    if !inside {
        return Err(invalid(ResumeTokenFault::OutsideRange { start, end }));
    }
    Ok(point)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn row(token: i64, key: &[u8]) -> ScanPoint {
        ScanPoint::AfterRow(RowPosition {
            token: Token(token),
            key: key.to_vec(),
        })
    }

    #[test]
    fn tokens_round_trip_within_their_range() {
        for point in [
            ScanPoint::AfterToken(Token(5)),
            row(6, b"k"),
            row(10, b"\0"),
        ] {
            assert_eq!(decode(&encode(&point), Token(5), Token(10)).unwrap(), point);
        }
    }

    #[test]
    fn tokens_outside_the_range_or_garbled_are_refused_with_a_reason() {
        let message = |bytes: &[u8]| decode(bytes, Token(0), Token(10)).unwrap_err().to_string();
        assert!(message(&encode(&row(11, b"k"))).contains("outside the range"));
        assert!(message(&encode(&ScanPoint::AfterToken(Token(10)))).contains("outside"));
        assert!(message(b"garbage").contains("too short"));
        let mut flipped = encode(&row(3, b"k"));
        flipped[4] ^= 1;
        assert!(message(&flipped).contains("checksum"));
        assert!(message(b"").contains("resume_token"));
    }

    proptest! {
        /// Fuzz: arbitrary bytes decode to a point in the range or to an
        /// error, never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = decode(&bytes, Token(i64::MIN), Token(i64::MAX));
        }
    }
}
