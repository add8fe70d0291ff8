//! The SMB 3.x TRANSFORM_HEADER (MS-SMB2 2.2.41) that carries an
//! encrypted message or compound. The AEAD itself is the caller's (crypto
//! crate); this is only the framing, shared by server, clients and tests.

use std::ops::Range;

use crate::header::TRANSFORM_PROTOCOL_ID;
use crate::wire::{Error, Reader, Result};

pub const TRANSFORM_HEADER_LEN: usize = 52;
/// Flags (EncryptionAlgorithm in 3.0): the message is encrypted.
pub const TRANSFORM_FLAG_ENCRYPTED: u16 = 0x0001;
/// Bytes 20..52 of the transform header are the AEAD's associated data.
pub const TRANSFORM_AAD_RANGE: Range<usize> = 20..52;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransformHeader {
    /// The AEAD tag.
    pub signature: [u8; 16],
    /// The nonce, in its first 11 (CCM) or 12 (GCM) bytes.
    pub nonce: [u8; 16],
    pub original_message_size: u32,
    pub flags: u16,
    pub session_id: u64,
}

impl TransformHeader {
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let mut r = Reader::new(buf);
        if r.array::<4>()? != TRANSFORM_PROTOCOL_ID {
            return Err(Error("bad transform protocol id"));
        }
        let signature = r.array()?;
        let nonce = r.array()?;
        let original_message_size = r.u32()?;
        r.skip(2)?;
        let flags = r.u16()?;
        let session_id = r.u64()?;
        Ok(TransformHeader {
            signature,
            nonce,
            original_message_size,
            flags,
            session_id,
        })
    }

    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&TRANSFORM_PROTOCOL_ID);
        out.extend_from_slice(&self.signature);
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.original_message_size.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.session_id.to_le_bytes());
    }
}

/// A received transformed message, checked as a receiver must check it
/// before decrypting (MS-SMB2 3.3.5.2.1.1): encrypted flag set, a size that
/// is that of the body, and a body.
#[derive(Debug)]
pub struct Sealed<'a> {
    pub header: TransformHeader,
    /// The associated data: bytes 20..52.
    pub aad: &'a [u8],
    /// The ciphertext.
    pub body: &'a [u8],
}

impl<'a> Sealed<'a> {
    pub fn parse(frame: &'a [u8]) -> Result<Sealed<'a>> {
        let header = TransformHeader::parse(frame)?;
        let body = &frame[TRANSFORM_HEADER_LEN..];
        if header.flags != TRANSFORM_FLAG_ENCRYPTED {
            return Err(Error("transform not marked encrypted"));
        }
        if header.original_message_size as usize != body.len() || body.is_empty() {
            return Err(Error("transform size is not that of its body"));
        }
        Ok(Sealed {
            header,
            aad: &frame[TRANSFORM_AAD_RANGE],
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::tests::hex;

    #[test]
    fn transform_header_matches_microsoft_example() {
        // The start of the encrypted READ request of Microsoft's "SMB 3.1.1
        // Encryption in Windows 10", appendix A.1 (AES-128-GCM).
        let raw = hex(
            "FD534D426DAC0B6FD85A3ED42BB917DA38FE0386D7AA8C6D36859243B715E0A60000000071000000
             00000100250000000010000088A47BF0",
        );
        let th = TransformHeader::parse(&raw).unwrap();
        assert_eq!(th.original_message_size, 0x71);
        assert_eq!(th.flags, TRANSFORM_FLAG_ENCRYPTED);
        assert_eq!(th.session_id, 0x0000_1000_0000_0025);
        assert_eq!(&th.nonce[..12], &raw[20..32]);
        let mut out = Vec::new();
        th.write(&mut out);
        assert_eq!(out, raw[..TRANSFORM_HEADER_LEN]);
        assert!(TransformHeader::parse(&raw[..51]).is_err());
    }

    #[test]
    fn round_trip_and_checks() {
        let h = TransformHeader {
            signature: [1; 16],
            nonce: [2; 16],
            original_message_size: 3,
            flags: TRANSFORM_FLAG_ENCRYPTED,
            session_id: 7,
        };
        let mut frame = Vec::new();
        h.write(&mut frame);
        assert_eq!(frame.len(), TRANSFORM_HEADER_LEN);
        assert!(Sealed::parse(&frame).is_err(), "no body");
        frame.extend_from_slice(b"abc");
        let s = Sealed::parse(&frame).unwrap();
        assert_eq!(s.header, h);
        assert_eq!(s.body, b"abc");
        assert_eq!(s.aad, &frame[20..52]);
        frame.push(0);
        assert!(Sealed::parse(&frame).is_err(), "size mismatch");
        assert!(Sealed::parse(&frame[..40]).is_err());
    }
}
