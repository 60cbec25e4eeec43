//! Message tags: every gRPC message of a call's request body carries a tag
//! that binds it to the call (its nonce) and to its place in the call.
//!
//! A gRPC body is a sequence of frames, `flag (1) | length (4, big-endian)
//! | message`. The caller seals each into `flag | length + 32 | message |
//! tag`; the receiver checks the tag and hands the original frame on, so
//! the service decodes exactly what it would have without tags. The
//! [`MessageSplitter`] cuts a body (which arrives in chunks of any size)
//! into whole frames; it refuses a frame longer than its limit before
//! buffering it.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hmac::Mac;
use ringstore_identity::PairKey;

use crate::error::Refusal;
use crate::proof::Nonce;

/// Bytes of a message tag.
pub const TAG_LEN: usize = 32;
/// Bytes of a gRPC frame header.
const HEADER_LEN: usize = 5;
/// The tag's domain.
const DOMAIN: &[u8] = b"ringstore-internode-message-v2";

/// Cuts a body into whole gRPC frames.
#[derive(Debug)]
pub struct MessageSplitter {
    buffer: BytesMut,
    max_len: usize,
}

impl MessageSplitter {
    /// A splitter refusing frames of more than `max_len` bytes of message.
    pub fn new(max_len: usize) -> MessageSplitter {
        MessageSplitter {
            buffer: BytesMut::new(),
            max_len,
        }
    }

    /// Adds the next chunk of the body.
    pub fn push(&mut self, chunk: impl Buf) {
        self.buffer.put(chunk);
    }

    /// The next whole frame's flag and message, if one has arrived.
    pub fn next_frame(&mut self) -> Result<Option<(u8, Bytes)>, Refusal> {
        if self.buffer.len() < HEADER_LEN {
            return Ok(None);
        }
        let flag = self.buffer[0];
        let len = u32::from_be_bytes(self.buffer[1..HEADER_LEN].try_into().expect("4 bytes"));
        let len = len as usize;
        if len > self.max_len {
            return Err(Refusal::MalformedBody("a message longer than the limit"));
        }
        if self.buffer.len() < HEADER_LEN + len {
            self.buffer.reserve(HEADER_LEN + len - self.buffer.len());
            return Ok(None);
        }
        self.buffer.advance(HEADER_LEN);
        Ok(Some((flag, self.buffer.split_to(len).freeze())))
    }

    /// Checks that the body ended between frames.
    pub fn finish(&self) -> Result<(), Refusal> {
        if self.buffer.is_empty() {
            Ok(())
        } else {
            Err(Refusal::MalformedBody("the body ends inside a message"))
        }
    }
}

/// The tag of message `sequence` of the call with `nonce`.
fn tag(key: &PairKey, nonce: Nonce, sequence: u64, flag: u8, message: &[u8]) -> impl Mac {
    let mut mac = key.mac();
    mac.update(DOMAIN);
    mac.update(&nonce.0);
    mac.update(&sequence.to_le_bytes());
    mac.update(&[flag]);
    mac.update(&(message.len() as u64).to_le_bytes());
    mac.update(message);
    mac
}

/// The caller's side: seals each message of one call, in order.
#[derive(Debug)]
pub struct MessageSealer {
    key: PairKey,
    nonce: Nonce,
    next: u64,
}

impl MessageSealer {
    /// The sealer of the call with `nonce`, under `key`.
    pub fn new(key: PairKey, nonce: Nonce) -> MessageSealer {
        MessageSealer {
            key,
            nonce,
            next: 0,
        }
    }

    /// The sealed frame of the next message.
    pub fn seal(&mut self, flag: u8, message: &[u8]) -> Bytes {
        let tag = tag(&self.key, self.nonce, self.next, flag, message)
            .finalize()
            .into_bytes();
        self.next += 1;
        let mut frame = BytesMut::with_capacity(HEADER_LEN + message.len() + TAG_LEN);
        frame.put_u8(flag);
        frame.put_u32((message.len() + TAG_LEN) as u32);
        frame.put_slice(message);
        frame.put_slice(&tag);
        frame.freeze()
    }
}

/// The receiver's side: checks each message of one call, in order.
#[derive(Debug)]
pub struct MessageOpener {
    key: PairKey,
    nonce: Nonce,
    next: u64,
}

impl MessageOpener {
    /// The opener of the call with `nonce`, under `key`.
    pub fn new(key: PairKey, nonce: Nonce) -> MessageOpener {
        MessageOpener {
            key,
            nonce,
            next: 0,
        }
    }

    /// Checks the next sealed message (`sealed`: message and tag, as the
    /// splitter cut them) and returns the original frame's header and
    /// message.
    pub fn open(&mut self, flag: u8, sealed: Bytes) -> Result<(Bytes, Bytes), Refusal> {
        let sequence = self.next;
        if sealed.len() < TAG_LEN {
            return Err(Refusal::BadMessage { sequence });
        }
        let message = sealed.slice(..sealed.len() - TAG_LEN);
        tag(&self.key, self.nonce, sequence, flag, &message)
            .verify_slice(&sealed[sealed.len() - TAG_LEN..])
            .map_err(|_| Refusal::BadMessage { sequence })?;
        self.next += 1;
        let mut header = BytesMut::with_capacity(HEADER_LEN);
        header.put_u8(flag);
        header.put_u32(message.len() as u32);
        Ok((header.freeze(), message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::tests::{other_key, pair};
    use proptest::prelude::*;

    fn frame(flag: u8, message: &[u8]) -> Vec<u8> {
        let mut frame = vec![flag];
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(message);
        frame
    }

    /// Seals `messages` as one call and returns the body.
    fn sealed_body(messages: &[&[u8]], nonce: Nonce) -> Vec<u8> {
        let mut sealer = MessageSealer::new(pair().2, nonce);
        messages
            .iter()
            .flat_map(|m| sealer.seal(0, m).to_vec())
            .collect()
    }

    /// Opens `body`, cut into chunks of `chunk` bytes: the original body.
    fn open_body(body: &[u8], nonce: Nonce, chunk: usize) -> Result<Vec<u8>, Refusal> {
        let mut splitter = MessageSplitter::new(1 << 20);
        let mut opener = MessageOpener::new(pair().2, nonce);
        let mut out = Vec::new();
        for piece in body.chunks(chunk.max(1)) {
            splitter.push(piece);
            while let Some((flag, sealed)) = splitter.next_frame()? {
                let (header, message) = opener.open(flag, sealed)?;
                out.extend_from_slice(&header);
                out.extend_from_slice(&message);
            }
        }
        splitter.finish()?;
        Ok(out)
    }

    #[test]
    fn sealed_messages_open_to_the_original_frames_in_chunks_of_any_size() {
        let messages: [&[u8]; 3] = [b"first", b"", b"third message"];
        let body = sealed_body(&messages, Nonce([1; 16]));
        let original: Vec<u8> = messages.iter().flat_map(|m| frame(0, m)).collect();
        for chunk in [1, 2, 5, 7, 40, 1000] {
            assert_eq!(open_body(&body, Nonce([1; 16]), chunk).unwrap(), original);
        }
    }

    #[test]
    fn a_message_of_another_call_or_place_does_not_open() {
        let body = sealed_body(&[b"a", b"b"], Nonce([1; 16]));
        assert_eq!(
            open_body(&body, Nonce([2; 16]), 1000),
            Err(Refusal::BadMessage { sequence: 0 }),
            "moved to another call"
        );
        // Swapping the two messages (each 5 + 1 + 32 bytes).
        let (first, second) = body.split_at(38);
        let swapped = [second, first].concat();
        assert_eq!(
            open_body(&swapped, Nonce([1; 16]), 1000),
            Err(Refusal::BadMessage { sequence: 0 })
        );
        // A message injected between them, sealed under another key.
        let mut intruder = MessageSealer::new(other_key(), Nonce([1; 16]));
        intruder.seal(0, b"a");
        let injected = [first, &intruder.seal(0, b"evil"), second].concat();
        assert_eq!(
            open_body(&injected, Nonce([1; 16]), 1000),
            Err(Refusal::BadMessage { sequence: 1 })
        );
        // An unsealed message.
        let bare = [first, &frame(0, b"bare")].concat();
        assert!(open_body(&bare, Nonce([1; 16]), 1000).is_err());
    }

    #[test]
    fn a_frame_over_the_limit_is_refused_before_it_is_buffered() {
        let mut splitter = MessageSplitter::new(100);
        splitter.push(&[0u8, 0, 0, 0, 101][..]);
        assert!(matches!(
            splitter.next_frame(),
            Err(Refusal::MalformedBody(_))
        ));
        let mut truncated = MessageSplitter::new(100);
        truncated.push(&[0u8, 0, 0, 0, 10, 1, 2][..]);
        assert_eq!(truncated.next_frame(), Ok(None));
        assert!(truncated.finish().is_err());
    }

    proptest! {
        #[test]
        fn any_changed_byte_is_caught(
            messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..4),
            at in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let refs: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
            let mut body = sealed_body(&refs, Nonce([3; 16]));
            let i = at.index(body.len());
            body[i] ^= 1 << bit;
            prop_assert!(open_body(&body, Nonce([3; 16]), 7).is_err());
        }
    }
}
