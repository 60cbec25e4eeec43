//! What a request may hold: the bounds every path that takes a key checks.
//!
//! A key is 1 byte to [`MAX_KEY_BYTES`] (Cassandra's partition key limit):
//! the empty key has no token, and a longer key would not fit the limits
//! the storage and the wire keep. The client port checks a key before it
//! coordinates anything; a replica checks it again on what peers send (a
//! replica write, a read, a hint, a scan's resume point), because a peer of
//! another build, or a hostile one, is not trusted to have.
//!
//! A domain module: the client service, the internode service and the scan
//! code use it, and it uses only the error type.

use crate::error::{NodeError, Result};

/// The largest key accepted, in bytes (Cassandra's partition key limit).
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// The longest TTL accepted: 20 years, as Cassandra.
pub const MAX_TTL_SECONDS: u32 = 20 * 365 * 24 * 3600;

/// Checks a key: 1 byte to [`MAX_KEY_BYTES`]; `INVALID_ARGUMENT` otherwise.
pub fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(NodeError::EmptyKey);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(NodeError::KeyTooLong {
            len: key.len(),
            max: MAX_KEY_BYTES,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_one_byte_to_the_limit_pass() {
        assert!(check_key(b"k").is_ok());
        assert!(check_key(&vec![7; MAX_KEY_BYTES]).is_ok());
    }

    #[test]
    fn empty_and_oversized_keys_are_invalid_arguments_that_say_why() {
        let empty = check_key(b"").unwrap_err();
        assert_eq!(empty.code(), tonic::Code::InvalidArgument);
        assert_eq!(empty.to_string(), "key must not be empty");
        let long = check_key(&vec![7; MAX_KEY_BYTES + 1]).unwrap_err();
        assert_eq!(long.code(), tonic::Code::InvalidArgument);
        assert_eq!(
            long.to_string(),
            format!(
                "key is {} bytes; the limit is {MAX_KEY_BYTES} bytes",
                MAX_KEY_BYTES + 1
            )
        );
    }
}
