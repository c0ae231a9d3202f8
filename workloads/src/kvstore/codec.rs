//! The service's codec: prost's messages with buffers sized for them. tonic's default
//! codec starts every call's encode and decode buffers at 8 KiB (four such allocations an
//! RPC, client and server, each beyond the allocator's per-thread cache) and grows an
//! encode buffer by doubling while a large value is written into it. Here the buffers
//! start at [`BUFFER_SIZE`], which holds a small message whole, and the encoder reserves a
//! message's encoded length before writing it, so a large one grows its buffer once. The
//! decoder is prost's (tonic reserves a message's length once its header is read). The
//! integration tests send values on both sides of the buffer's size through it.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

/// Bytes every call's encode and decode buffers start with: a key and value of the mean
/// sizes of `--mean-value-size 64` with their framing fit, and an allocation this small
/// comes from the allocator's per-thread cache. Chosen with `benches/kvstore_rpc.py` (64-byte
/// values, concurrency 64: allocations and CPU per RPC against tonic's 8 KiB).
pub const BUFFER_SIZE: usize = 1024;

/// A streaming call's encoder yields after this many bytes (tonic's default).
const YIELD_THRESHOLD: usize = 32 << 10;

fn settings() -> BufferSettings {
    BufferSettings::new(BUFFER_SIZE, YIELD_THRESHOLD)
}

/// prost's codec with buffers of [`BUFFER_SIZE`] (`codec_path` of the generated service).
#[derive(Debug, Clone)]
pub struct KvCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for KvCodec<T, U> {
    fn default() -> Self {
        KvCodec(PhantomData)
    }
}

impl<T, U> Codec for KvCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = KvEncoder<T>;
    type Decoder = KvDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        KvEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        KvDecoder(ProstDecoder::new(settings()))
    }
}

/// Encodes a message into a buffer reserved to its length first.
#[derive(Debug, Clone)]
pub struct KvEncoder<T>(PhantomData<T>);

impl<T: Message> Encoder for KvEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        item.encode(buf)
            .map_err(|e| Status::internal(format!("encoding a message: {e}")))
    }

    fn buffer_settings(&self) -> BufferSettings {
        settings()
    }
}

/// prost's decoder with buffers of [`BUFFER_SIZE`].
#[derive(Debug, Clone)]
pub struct KvDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for KvDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf)
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
