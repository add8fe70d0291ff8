//! MIT keytab files (format 0x0502, as `ktutil` and `kadmin ktadd` write
//! them): the service's long-term keys, by principal, version and
//! encryption type, from which a Kerberos acceptor decrypts tickets.

use std::fmt;

use zeroize::Zeroizing;

/// One key of a keytab.
pub struct KeytabEntry {
    /// `component/component` without the realm, e.g. `cifs/nas`.
    pub principal: String,
    pub realm: String,
    /// Key version number.
    pub kvno: u32,
    /// Kerberos encryption type (17 aes128-cts-hmac-sha1-96, 18 aes256).
    pub enctype: i32,
    pub key: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for KeytabEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key stays out of logs.
        f.debug_struct("KeytabEntry")
            .field("principal", &self.principal)
            .field("realm", &self.realm)
            .field("kvno", &self.kvno)
            .field("enctype", &self.enctype)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum KeytabError {
    /// Not a version 0x0502 keytab.
    Version,
    /// An entry runs past the end of the file or of itself.
    Truncated,
}

impl fmt::Display for KeytabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeytabError::Version => f.write_str("not a keytab (version 0x0502 expected)"),
            KeytabError::Truncated => f.write_str("keytab entry cut short"),
        }
    }
}

impl std::error::Error for KeytabError {}

/// Reads every entry of a keytab; deleted entries (negative sizes) are
/// skipped.
pub fn parse(data: &[u8]) -> Result<Vec<KeytabEntry>, KeytabError> {
    if data.get(..2) != Some(&[5, 2]) {
        return Err(KeytabError::Version);
    }
    let mut r = Reader { data, at: 2 };
    let mut entries = Vec::new();
    while r.at < data.len() {
        let size = r.u32()? as i32;
        let len = size.unsigned_abs() as usize;
        let body = r.take(len)?;
        if size > 0 {
            entries.push(entry(body)?);
        }
    }
    Ok(entries)
}

fn entry(body: &[u8]) -> Result<KeytabEntry, KeytabError> {
    let mut r = Reader { data: body, at: 0 };
    let components = r.u16()?;
    let realm = r.text()?;
    let mut names = Vec::with_capacity(usize::from(components));
    for _ in 0..components {
        names.push(r.text()?);
    }
    let _name_type = r.u32()?;
    let _timestamp = r.u32()?;
    let kvno8 = r.take(1)?[0];
    let enctype = r.u16()? as i16;
    let key_len = r.u16()?;
    let key = Zeroizing::new(r.take(usize::from(key_len))?.to_vec());
    // A 32-bit version, when present, supersedes the 8-bit one.
    let kvno = match body.len() - r.at {
        n if n >= 4 => r.u32()?,
        _ => u32::from(kvno8),
    };
    Ok(KeytabEntry {
        principal: names.join("/"),
        realm,
        kvno,
        enctype: i32::from(enctype),
        key,
    })
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], KeytabError> {
        let end = self.at.checked_add(n).ok_or(KeytabError::Truncated)?;
        let bytes = self.data.get(self.at..end).ok_or(KeytabError::Truncated)?;
        self.at = end;
        Ok(bytes)
    }

    fn u16(&mut self) -> Result<u16, KeytabError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, KeytabError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn text(&mut self) -> Result<String, KeytabError> {
        let len = self.u16()?;
        Ok(String::from_utf8_lossy(self.take(usize::from(len))?).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYTAB: &[u8] = include_bytes!("../../../docs/kerberos/server.keytab");

    #[test]
    fn reads_the_throwaway_kdcs_keytab() {
        let entries = parse(KEYTAB).unwrap();
        let found: Vec<(&str, &str, i32, usize)> = entries
            .iter()
            .map(|e| {
                (
                    e.principal.as_str(),
                    e.realm.as_str(),
                    e.enctype,
                    e.key.len(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                ("cifs/copyless", "COPYLESS.TEST", 18, 32),
                ("cifs/copyless", "COPYLESS.TEST", 17, 16)
            ]
        );
        assert!(entries.iter().all(|e| e.kvno == 2));
    }

    #[test]
    fn every_cut_of_a_keytab_is_an_error_or_fewer_entries_never_a_panic() {
        for n in 0..KEYTAB.len() {
            match parse(&KEYTAB[..n]) {
                Ok(entries) => assert!(entries.len() < 2, "cut at {n}"),
                Err(e) => assert!(n < 2 || e == KeytabError::Truncated, "cut at {n}: {e}"),
            }
        }
        assert_eq!(parse(b"\x05\x01").err(), Some(KeytabError::Version));
    }
}
