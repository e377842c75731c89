//! The wire format between producers and the broker: length-prefixed frames on TCP.
//!
//! Request: `[len u32][correlation u32][codec u8][records u32][batch]`, where the batch
//! is `[len u32][message]...`, snappy-compressed (raw format) when the codec says so.
//! Response: `[len u32][correlation u32][status u8][base_offset u64]`.

use std::io::{Read, Write};

use crate::error::{IoContext, KernelError};

/// Compression of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Codec {
    /// Sent as is.
    None,
    /// Snappy raw format.
    Snappy,
}

impl Codec {
    /// The spelling used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Snappy => "snappy",
        }
    }

    fn tag(self) -> u8 {
        match self {
            Codec::None => 0,
            Codec::Snappy => 1,
        }
    }

    fn from_tag(tag: u8) -> Result<Self, KernelError> {
        match tag {
            0 => Ok(Codec::None),
            1 => Ok(Codec::Snappy),
            other => Err(KernelError::Corrupt(format!("unknown codec {other}"))),
        }
    }
}

/// Frames larger than this are refused rather than allocated.
pub const MAX_FRAME_BYTES: usize = 64 << 20;

/// A produce request as the broker receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceRequest {
    /// Echoed in the response.
    pub correlation: u32,
    /// How the batch is compressed.
    pub codec: Codec,
    /// Messages in the batch.
    pub records: u32,
    /// The batch as sent (still compressed); the broker stores it as is.
    pub batch: Vec<u8>,
}

/// The broker's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProduceResponse {
    /// The request's correlation id.
    pub correlation: u32,
    /// 0 for success.
    pub status: u8,
    /// Offset of the batch's first message.
    pub base_offset: u64,
}

/// Encodes messages into a batch (compressed with `codec`).
pub fn encode_batch(messages: &[Vec<u8>], codec: Codec) -> Result<Vec<u8>, KernelError> {
    let mut plain = Vec::with_capacity(messages.iter().map(|m| m.len() + 4).sum());
    for message in messages {
        plain.extend_from_slice(&(message.len() as u32).to_le_bytes());
        plain.extend_from_slice(message);
    }
    match codec {
        Codec::None => Ok(plain),
        Codec::Snappy => snap::raw::Encoder::new()
            .compress_vec(&plain)
            .map_err(|e| KernelError::Corrupt(format!("snappy: {e}"))),
    }
}

/// Decodes a batch back into its messages, checking its framing.
pub fn decode_batch(batch: &[u8], codec: Codec) -> Result<Vec<Vec<u8>>, KernelError> {
    let plain;
    let bytes = match codec {
        Codec::None => batch,
        Codec::Snappy => {
            plain = snap::raw::Decoder::new()
                .decompress_vec(batch)
                .map_err(|e| KernelError::Corrupt(format!("snappy: {e}")))?;
            &plain[..]
        }
    };
    let mut messages = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let len = bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| KernelError::Corrupt("truncated message length".to_string()))?;
        let message = bytes
            .get(at + 4..at + 4 + len)
            .ok_or_else(|| KernelError::Corrupt("truncated message".to_string()))?;
        messages.push(message.to_vec());
        at += 4 + len;
    }
    Ok(messages)
}

/// Writes a request frame.
pub fn write_request(out: &mut impl Write, request: &ProduceRequest) -> Result<(), KernelError> {
    let len = 4 + 1 + 4 + request.batch.len();
    let mut frame = Vec::with_capacity(4 + len);
    frame.extend_from_slice(&(len as u32).to_le_bytes());
    frame.extend_from_slice(&request.correlation.to_le_bytes());
    frame.push(request.codec.tag());
    frame.extend_from_slice(&request.records.to_le_bytes());
    frame.extend_from_slice(&request.batch);
    out.write_all(&frame)
        .io_context("sending a produce request")
}

fn read_frame(input: &mut impl Read) -> Result<Option<Vec<u8>>, KernelError> {
    let mut len = [0u8; 4];
    match input.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e).io_context("reading a frame length"),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(KernelError::Corrupt(format!("frame of {len} bytes")));
    }
    let mut frame = vec![0u8; len];
    input.read_exact(&mut frame).io_context("reading a frame")?;
    Ok(Some(frame))
}

/// Reads a request frame; `None` when the peer closed the connection cleanly.
pub fn read_request(input: &mut impl Read) -> Result<Option<ProduceRequest>, KernelError> {
    let Some(frame) = read_frame(input)? else {
        return Ok(None);
    };
    if frame.len() < 9 {
        return Err(KernelError::Corrupt("short produce request".to_string()));
    }
    Ok(Some(ProduceRequest {
        correlation: u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")),
        codec: Codec::from_tag(frame[4])?,
        records: u32::from_le_bytes(frame[5..9].try_into().expect("4 bytes")),
        batch: frame[9..].to_vec(),
    }))
}

/// Writes a response frame.
pub fn write_response(out: &mut impl Write, response: &ProduceResponse) -> Result<(), KernelError> {
    let mut frame = [0u8; 4 + 13];
    frame[..4].copy_from_slice(&13u32.to_le_bytes());
    frame[4..8].copy_from_slice(&response.correlation.to_le_bytes());
    frame[8] = response.status;
    frame[9..].copy_from_slice(&response.base_offset.to_le_bytes());
    out.write_all(&frame)
        .io_context("sending a produce response")
}

/// Reads a response frame.
pub fn read_response(input: &mut impl Read) -> Result<ProduceResponse, KernelError> {
    let frame = read_frame(input)?
        .ok_or_else(|| KernelError::Broker("connection closed before the ack".to_string()))?;
    if frame.len() != 13 {
        return Err(KernelError::Corrupt("bad produce response".to_string()));
    }
    Ok(ProduceResponse {
        correlation: u32::from_le_bytes(frame[..4].try_into().expect("4 bytes")),
        status: frame[4],
        base_offset: u64::from_le_bytes(frame[5..].try_into().expect("8 bytes")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_with_both_codecs() {
        let messages = vec![b"a".to_vec(), vec![b'x'; 1000], Vec::new()];
        for codec in [Codec::None, Codec::Snappy] {
            let batch = encode_batch(&messages, codec).unwrap();
            assert_eq!(decode_batch(&batch, codec).unwrap(), messages);
        }
        let snappy = encode_batch(&messages, Codec::Snappy).unwrap();
        assert!(
            snappy.len() < 200,
            "repetitive data compresses: {}",
            snappy.len()
        );
    }

    #[test]
    fn frames_round_trip_and_bad_ones_are_refused() {
        let request = ProduceRequest {
            correlation: 7,
            codec: Codec::Snappy,
            records: 2,
            batch: vec![1, 2, 3],
        };
        let mut wire = Vec::new();
        write_request(&mut wire, &request).unwrap();
        assert_eq!(read_request(&mut &wire[..]).unwrap(), Some(request));
        assert_eq!(read_request(&mut &[][..]).unwrap(), None);
        let huge = (MAX_FRAME_BYTES as u32 + 1).to_le_bytes();
        assert!(read_request(&mut &huge[..]).is_err());
        assert!(decode_batch(&[9, 0, 0, 0, 1], Codec::None).is_err());
    }
}
