//! The SMB1 NEGOTIATE some clients send first (MS-SMB2 3.3.5.3.1): we only
//! read its dialect strings to decide whether the client speaks SMB2.

use crate::wire::{Error, Reader, Result};

pub const PROTOCOL_ID: [u8; 4] = [0xFF, b'S', b'M', b'B'];
const COM_NEGOTIATE: u8 = 0x72;
const HEADER_LEN: usize = 32;

/// What the SMB1 NEGOTIATE asks of an SMB2 server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upgrade {
    /// "SMB 2.???" offered: answer with the wildcard dialect 0x02FF.
    Wildcard,
    /// Only "SMB 2.002" offered: answer with dialect 2.0.2.
    Smb202,
    /// No SMB2 dialect: the client cannot talk to us.
    None,
}

pub fn is_smb1(msg: &[u8]) -> bool {
    msg.starts_with(&PROTOCOL_ID)
}

pub fn parse_negotiate(msg: &[u8]) -> Result<Upgrade> {
    let mut r = Reader::new(msg);
    if r.array::<4>()? != PROTOCOL_ID {
        return Err(Error("not SMB1"));
    }
    if r.u8()? != COM_NEGOTIATE {
        return Err(Error("SMB1 command other than NEGOTIATE"));
    }
    r.skip(HEADER_LEN - 5)?;
    let word_count = r.u8()? as usize;
    r.skip(word_count * 2)?;
    let byte_count = r.u16()? as usize;
    let data = r.bytes(byte_count)?;
    let mut wildcard = false;
    let mut smb202 = false;
    for entry in data.split(|b| *b == 0) {
        let name = match entry.split_first() {
            Some((0x02, name)) => name,
            _ => continue,
        };
        match name {
            b"SMB 2.???" => wildcard = true,
            b"SMB 2.002" => smb202 = true,
            _ => {}
        }
    }
    Ok(if wildcard {
        Upgrade::Wildcard
    } else if smb202 {
        Upgrade::Smb202
    } else {
        Upgrade::None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn negotiate(dialects: &[&str]) -> Vec<u8> {
        let mut m = PROTOCOL_ID.to_vec();
        m.push(COM_NEGOTIATE);
        m.resize(HEADER_LEN, 0);
        m.push(0);
        let mut data = Vec::new();
        for d in dialects {
            data.push(2);
            data.extend_from_slice(d.as_bytes());
            data.push(0);
        }
        m.extend_from_slice(&(data.len() as u16).to_le_bytes());
        m.extend_from_slice(&data);
        m
    }

    #[test]
    fn finds_smb2_dialects() {
        let m = negotiate(&["NT LM 0.12", "SMB 2.002", "SMB 2.???"]);
        assert_eq!(parse_negotiate(&m), Ok(Upgrade::Wildcard));
        let m = negotiate(&["NT LM 0.12", "SMB 2.002"]);
        assert_eq!(parse_negotiate(&m), Ok(Upgrade::Smb202));
        let m = negotiate(&["NT LM 0.12"]);
        assert_eq!(parse_negotiate(&m), Ok(Upgrade::None));
        for n in 0..m.len() {
            let _ = parse_negotiate(&m[..n]);
        }
    }
}
