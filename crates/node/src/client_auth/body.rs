//! Finding the keyspace a unary gRPC request names, without knowing its
//! message type: the protobuf wire format is scanned for one string field.

use bytes::{Buf, Bytes};
use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};

/// Why a request body could not be read for its keyspace.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Not one uncompressed gRPC message.
    #[error("malformed gRPC request: {0}")]
    Framing(&'static str),
    /// The message does not decode, or its keyspace is not UTF-8.
    #[error("malformed request message")]
    Message,
}

/// The string in field `field` of the one gRPC message in `body` (the last
/// occurrence wins, as protobuf decoders do; absent: `None`).
pub fn keyspace_in(body: &Bytes, field: u32) -> Result<Option<String>, BodyError> {
    if body.len() < 5 {
        return Err(BodyError::Framing("shorter than a message header"));
    }
    if body[0] != 0 {
        return Err(BodyError::Framing("compressed requests are not accepted"));
    }
    let length = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if body.len() - 5 != length {
        return Err(BodyError::Framing("one message per unary request"));
    }
    let mut message = &body[5..];
    let mut found = None;
    while message.has_remaining() {
        let (tag, wire_type) = decode_key(&mut message).map_err(|_| BodyError::Message)?;
        if tag == field && wire_type == WireType::LengthDelimited {
            let len = decode_varint(&mut message).map_err(|_| BodyError::Message)? as usize;
            if len > message.remaining() {
                return Err(BodyError::Message);
            }
            let text = std::str::from_utf8(&message[..len]).map_err(|_| BodyError::Message)?;
            found = Some(text.to_string());
            message.advance(len);
        } else {
            skip_field(wire_type, tag, &mut message, DecodeContext::default())
                .map_err(|_| BodyError::Message)?;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use ringstore_proto::v1 as pb;

    use super::*;

    fn framed(message: &impl Message) -> Bytes {
        let encoded = message.encode_to_vec();
        let mut body = vec![0];
        body.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        body.extend_from_slice(&encoded);
        Bytes::from(body)
    }

    #[test]
    fn the_keyspace_is_found_in_any_message_by_its_field_number() {
        let put = pb::PutRequest {
            keyspace: "demo".into(),
            key: b"k".to_vec(),
            value: vec![7; 300],
            ttl_seconds: Some(5),
            ..Default::default()
        };
        assert_eq!(
            keyspace_in(&framed(&put), 1).unwrap().as_deref(),
            Some("demo")
        );
        let snapshot = pb::SnapshotRequest {
            keyspace: "other".into(),
            ..Default::default()
        };
        assert_eq!(
            keyspace_in(&framed(&snapshot), 2).unwrap().as_deref(),
            Some("other")
        );
        let every = pb::RepairRequest::default();
        assert_eq!(keyspace_in(&framed(&every), 1).unwrap(), None);
    }

    #[test]
    fn a_repeated_field_counts_as_its_last_occurrence_as_decoders_read_it() {
        let mut encoded = pb::GetRequest {
            keyspace: "allowed".into(),
            ..Default::default()
        }
        .encode_to_vec();
        encoded.extend(
            pb::GetRequest {
                keyspace: "secret".into(),
                ..Default::default()
            }
            .encode_to_vec(),
        );
        let mut body = vec![0];
        body.extend_from_slice(&(encoded.len() as u32).to_be_bytes());
        body.extend_from_slice(&encoded);
        let decoded = pb::GetRequest::decode(&encoded[..]).unwrap();
        assert_eq!(
            keyspace_in(&Bytes::from(body), 1).unwrap().as_deref(),
            Some(decoded.keyspace.as_str())
        );
    }

    #[test]
    fn malformed_bodies_are_errors_not_panics() {
        for body in [
            &b""[..],
            &[0, 0, 0, 0][..],
            &[1, 0, 0, 0, 0][..],
            &[0, 0, 0, 0, 9, 1][..],
            &[0, 0, 0, 0, 2, 0x0a, 0x05][..],
            &[0, 0, 0, 0, 3, 0x0a, 0x01, 0xff][..],
        ] {
            assert!(
                keyspace_in(&Bytes::copy_from_slice(body), 1).is_err(),
                "{body:?}"
            );
        }
    }
}
