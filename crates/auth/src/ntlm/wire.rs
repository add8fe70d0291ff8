//! The NTLM messages on the wire (MS-NLMP 2.2): NEGOTIATE and AUTHENTICATE
//! parsed, CHALLENGE built, and AV pairs both ways. All multi-byte integers
//! are little-endian; every length and offset is checked against the message.

use crate::acceptor::AuthError;

pub(crate) const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";

pub(crate) const NEGOTIATE: u32 = 1;
pub(crate) const CHALLENGE: u32 = 2;
pub(crate) const AUTHENTICATE: u32 = 3;

/// Where the MIC sits in an AUTHENTICATE message: after the Version field.
pub(crate) const MIC_OFFSET: usize = 72;
pub(crate) const MIC_LEN: usize = 16;

/// AV pair ids (MS-NLMP 2.2.2.1).
pub(crate) mod av {
    pub const EOL: u16 = 0;
    pub const NB_COMPUTER_NAME: u16 = 1;
    pub const NB_DOMAIN_NAME: u16 = 2;
    pub const DNS_COMPUTER_NAME: u16 = 3;
    pub const DNS_DOMAIN_NAME: u16 = 4;
    pub const FLAGS: u16 = 6;
    pub const TIMESTAMP: u16 = 7;
}

/// MsvAvFlags bit: the AUTHENTICATE message carries a MIC.
pub(crate) const AV_FLAG_MIC_PRESENT: u32 = 0x2;

/// The Version structure we send (MS-NLMP 2.2.2.10): Windows 10 / Server
/// 2022 numbers, NTLMSSP_REVISION_W2K3.
pub(crate) const OUR_VERSION: [u8; 8] = [10, 0, 0x7c, 0x4f, 0, 0, 0, 0x0f];

type Result<T> = std::result::Result<T, AuthError>;

fn u16_at(msg: &[u8], pos: usize) -> Result<u16> {
    let bytes = msg.get(pos..pos + 2).ok_or(AuthError::Malformed)?;
    Ok(u16::from_le_bytes([bytes[0], bytes[1]]))
}

fn u32_at(msg: &[u8], pos: usize) -> Result<u32> {
    let bytes = msg.get(pos..pos + 4).ok_or(AuthError::Malformed)?;
    Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// The payload a Len/MaxLen/Offset field at `pos` points to.
fn field(msg: &[u8], pos: usize) -> Result<&[u8]> {
    let len = usize::from(u16_at(msg, pos)?);
    let offset = usize::try_from(u32_at(msg, pos + 4)?).map_err(|_| AuthError::Malformed)?;
    if len == 0 {
        // Clients put all kinds of offsets on empty fields; nothing to check.
        return Ok(&[]);
    }
    let end = offset.checked_add(len).ok_or(AuthError::Malformed)?;
    msg.get(offset..end).ok_or(AuthError::Malformed)
}

/// The type of an NTLM message, after checking its signature.
pub(crate) fn message_type(msg: &[u8]) -> Result<u32> {
    if msg.get(..8) != Some(SIGNATURE.as_slice()) {
        return Err(AuthError::Malformed);
    }
    u32_at(msg, 8)
}

pub(crate) fn is_ntlm(token: &[u8]) -> bool {
    token.starts_with(SIGNATURE)
}

/// NEGOTIATE_MESSAGE: only the flags matter to the server.
pub(crate) fn parse_negotiate(msg: &[u8]) -> Result<u32> {
    if message_type(msg)? != NEGOTIATE {
        return Err(AuthError::Malformed);
    }
    u32_at(msg, 12)
}

/// Builds a CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2).
pub(crate) fn build_challenge(
    flags: u32,
    server_challenge: &[u8; 8],
    target_name: &[u8],
    target_info: &[u8],
) -> Vec<u8> {
    const HEADER: usize = 56;
    let name_offset = HEADER;
    let info_offset = name_offset + target_name.len();
    let mut msg = Vec::with_capacity(info_offset + target_info.len());
    msg.extend_from_slice(SIGNATURE);
    msg.extend_from_slice(&CHALLENGE.to_le_bytes());
    push_field(&mut msg, target_name.len(), name_offset);
    msg.extend_from_slice(&flags.to_le_bytes());
    msg.extend_from_slice(server_challenge);
    msg.extend_from_slice(&[0; 8]);
    push_field(&mut msg, target_info.len(), info_offset);
    // The Version field is zero unless the client asked for it.
    if flags & super::flags::VERSION != 0 {
        msg.extend_from_slice(&OUR_VERSION);
    } else {
        msg.extend_from_slice(&[0; 8]);
    }
    msg.extend_from_slice(target_name);
    msg.extend_from_slice(target_info);
    msg
}

/// Appends a Len/MaxLen/Offset field. Our payloads are built from short
/// names, far below the u16 limit; saturate rather than wrap if not.
pub(crate) fn push_field(msg: &mut Vec<u8>, len: usize, offset: usize) {
    let len = u16::try_from(len).unwrap_or(u16::MAX);
    let offset = u32::try_from(offset).unwrap_or(u32::MAX);
    msg.extend_from_slice(&len.to_le_bytes());
    msg.extend_from_slice(&len.to_le_bytes());
    msg.extend_from_slice(&offset.to_le_bytes());
}

/// Appends one AV pair. Values longer than a u16 cannot be sent; they are
/// cut, which only happens for absurd names.
pub(crate) fn push_av(out: &mut Vec<u8>, id: u16, value: &[u8]) {
    let value = value.get(..usize::from(u16::MAX)).unwrap_or(value);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
}

/// Finds the value of the first AV pair with `id` in `pairs`, stopping at
/// MsvAvEOL. Malformed pair lists yield an error.
/// Checks that a pair list is well formed up to its MsvAvEOL.
pub(crate) fn check_av_pairs(pairs: &[u8]) -> Result<()> {
    find_av(pairs, av::EOL).map(|_| ())
}

pub(crate) fn find_av(pairs: &[u8], id: u16) -> Result<Option<&[u8]>> {
    let mut rest = pairs;
    loop {
        let pair_id = u16_at(rest, 0)?;
        let len = usize::from(u16_at(rest, 2)?);
        if pair_id == av::EOL {
            return Ok(None);
        }
        let value = rest.get(4..4 + len).ok_or(AuthError::Malformed)?;
        if pair_id == id {
            return Ok(Some(value));
        }
        rest = &rest[4 + len..];
    }
}

/// The fields of an AUTHENTICATE_MESSAGE (MS-NLMP 2.2.1.3), borrowed.
pub(crate) struct Authenticate<'a> {
    pub nt_response: &'a [u8],
    pub domain: &'a [u8],
    pub user: &'a [u8],
    pub encrypted_session_key: &'a [u8],
    pub flags: u32,
}

pub(crate) fn parse_authenticate(msg: &[u8]) -> Result<Authenticate<'_>> {
    if message_type(msg)? != AUTHENTICATE {
        return Err(AuthError::Malformed);
    }
    // The fixed part up to and including NegotiateFlags is 64 bytes.
    if msg.len() < 64 {
        return Err(AuthError::Malformed);
    }
    Ok(Authenticate {
        nt_response: field(msg, 20)?,
        domain: field(msg, 28)?,
        user: field(msg, 36)?,
        encrypted_session_key: field(msg, 52)?,
        flags: u32_at(msg, 60)?,
    })
}

/// The fields of a CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2) a client needs.
pub(crate) struct Challenge<'a> {
    pub flags: u32,
    pub server_challenge: [u8; 8],
    pub target_name: &'a [u8],
    pub target_info: &'a [u8],
}

pub(crate) fn parse_challenge(msg: &[u8]) -> Result<Challenge<'_>> {
    if message_type(msg)? != CHALLENGE {
        return Err(AuthError::Malformed);
    }
    let server_challenge = msg
        .get(24..32)
        .and_then(|c| <[u8; 8]>::try_from(c).ok())
        .ok_or(AuthError::Malformed)?;
    Ok(Challenge {
        flags: u32_at(msg, 20)?,
        server_challenge,
        target_name: field(msg, 12)?,
        target_info: field(msg, 40)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_layout() {
        let msg = build_challenge(0xe28a_0215, &[1, 2, 3, 4, 5, 6, 7, 8], b"S\0", b"\0\0\0\0");
        let plain = build_challenge(0x0000_0201, &[0; 8], b"", b"");
        assert_eq!(&plain[48..56], &[0; 8]);
        assert_eq!(message_type(&msg), Ok(CHALLENGE));
        assert_eq!(u32_at(&msg, 20), Ok(0xe28a_0215));
        assert_eq!(&msg[24..32], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(field(&msg, 12), Ok(b"S\0".as_slice()));
        assert_eq!(field(&msg, 40), Ok(b"\0\0\0\0".as_slice()));
        assert_eq!(&msg[48..56], &OUR_VERSION);
        assert_eq!(msg.len(), 62);
    }

    #[test]
    fn fields_out_of_bounds_are_malformed() {
        let mut msg = build_challenge(0, &[0; 8], b"ab", b"");
        // Point the target name past the end.
        msg[16] = 0xff;
        assert_eq!(field(&msg, 12), Err(AuthError::Malformed));
        // Offset near u32::MAX must not overflow.
        msg[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(field(&msg, 12), Err(AuthError::Malformed));
        // Empty fields are fine whatever their offset.
        assert_eq!(field(&msg, 40), Ok(b"".as_slice()));
    }

    #[test]
    fn challenge_parses_back() {
        let msg = build_challenge(0xe28a_0215, &[1, 2, 3, 4, 5, 6, 7, 8], b"S\0", b"\0\0\0\0");
        let c = parse_challenge(&msg).unwrap();
        assert_eq!(c.flags, 0xe28a_0215);
        assert_eq!(c.server_challenge, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(c.target_name, b"S\0");
        assert_eq!(c.target_info, b"\0\0\0\0");
        for n in 0..msg.len() {
            assert!(parse_challenge(&msg[..n]).is_err(), "length {n}");
        }
    }

    #[test]
    fn av_pairs() {
        let mut pairs = Vec::new();
        push_av(&mut pairs, av::NB_DOMAIN_NAME, b"D\0");
        push_av(&mut pairs, av::FLAGS, &2u32.to_le_bytes());
        push_av(&mut pairs, av::EOL, b"");
        assert_eq!(find_av(&pairs, av::FLAGS), Ok(Some(&[2u8, 0, 0, 0][..])));
        assert_eq!(find_av(&pairs, av::TIMESTAMP), Ok(None));
        // A list without EOL that runs out is malformed.
        assert_eq!(
            find_av(&pairs[..10], av::TIMESTAMP),
            Err(AuthError::Malformed)
        );
    }

    #[test]
    fn negotiate_needs_signature_and_type() {
        let mut msg = SIGNATURE.to_vec();
        msg.extend_from_slice(&NEGOTIATE.to_le_bytes());
        msg.extend_from_slice(&0x1234_5678u32.to_le_bytes());
        assert_eq!(parse_negotiate(&msg), Ok(0x1234_5678));
        assert_eq!(parse_negotiate(&msg[..14]), Err(AuthError::Malformed));
        msg[8] = 3;
        assert_eq!(parse_negotiate(&msg), Err(AuthError::Malformed));
        msg[0] = b'X';
        assert_eq!(parse_negotiate(&msg), Err(AuthError::Malformed));
    }
}
