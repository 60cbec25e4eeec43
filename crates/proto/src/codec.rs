//! The gRPC codec of every ringstore service: prost's, except that the
//! encoder reserves a message's whole encoded length before encoding it.
//!
//! tonic encodes each message into a buffer that it hands on in pieces of
//! 32 KiB; prost writes into it field by field and lets it grow as it goes.
//! A message larger than the room left (a 256 KiB stream chunk, a page of
//! a scan) then grows the buffer by doubling from 8 KiB: six reallocations
//! and copies, about twice the message's bytes, and each fresh allocation
//! touches new memory. `perf` showed that growth as 13 % of a streaming
//! source's CPU. Reserving `encoded_len` first takes one allocation and
//! copies each byte once; for a small message that fits it is a no-op.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

/// [`tonic_prost::ProstCodec`] with a [`ReservingEncoder`]; decoding is
/// prost's as is (tonic reserves a message's length before reading it).
#[derive(Debug, Clone)]
pub struct ReservingProstCodec<T, U> {
    _messages: PhantomData<(T, U)>,
}

impl<T, U> Default for ReservingProstCodec<T, U> {
    fn default() -> Self {
        ReservingProstCodec {
            _messages: PhantomData,
        }
    }
}

impl<T, U> Codec for ReservingProstCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ReservingEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ReservingEncoder {
            _message: PhantomData,
        }
    }

    fn decoder(&mut self) -> Self::Decoder {
        tonic_prost::ProstCodec::<T, U>::raw_decoder(BufferSettings::default())
    }
}

/// Encodes a prost message after reserving its encoded length.
#[derive(Debug, Clone)]
pub struct ReservingEncoder<T> {
    _message: PhantomData<T>,
}

impl<T: Message> Encoder for ReservingEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        item.encode(buf)
            .map_err(|error| Status::internal(format!("encoding a message: {error}")))
    }
}
