//! Quota information (InfoType SMB2_0_INFO_QUOTA): a query's
//! SMB2_QUERY_QUOTA_INFO (MS-SMB2 2.2.37.1) with the SIDs it asks for
//! (FILE_GET_QUOTA_INFORMATION, MS-FSCC 2.4.41.1), and the entries
//! (FILE_QUOTA_INFORMATION, MS-FSCC 2.4.41) a query returns and a set
//! gives.

use crate::wire::{put_u32, put_u64};
use crate::InfoError;

/// QuotaThreshold or QuotaLimit: none.
pub const NO_LIMIT: u64 = u64::MAX;
/// QuotaLimit in a set: the entry is removed (MS-FSA 2.1.5.22).
pub const REMOVE_ENTRY: u64 = u64::MAX - 1;

/// The fixed part of an SMB2_QUERY_QUOTA_INFO.
const QUERY_FIXED: usize = 16;
/// The fixed part of a FILE_QUOTA_INFORMATION.
const ENTRY_FIXED: usize = 40;

/// A quota query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaQuery<'a> {
    pub return_single: bool,
    pub restart_scan: bool,
    /// The SIDs whose entries are asked for, in order; empty for an
    /// enumeration.
    pub sids: Vec<&'a [u8]>,
    /// Where an enumeration starts, when not where the last one ended.
    pub start_sid: Option<&'a [u8]>,
}

/// One user's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaEntry {
    pub sid: Vec<u8>,
    /// FILETIME of the last change of the entry; 0 when unknown.
    pub change_time: u64,
    pub used: u64,
    /// [`NO_LIMIT`] for none.
    pub threshold: u64,
    /// [`NO_LIMIT`] for none, [`REMOVE_ENTRY`] in a set.
    pub limit: u64,
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

/// The SID of `len` bytes at `at`: revision 1, its length what its
/// sub-authority count says.
fn sid(buf: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    let s = buf.get(at..at.checked_add(len)?)?;
    let count = usize::from(*s.get(1)?);
    (s[0] == 1 && count <= 15 && len == 8 + 4 * count).then_some(s)
}

/// A chain of entries linked by their NextEntryOffset, each handed to
/// `entry` with its offset; an offset that does not move past the entry
/// (`least` bytes at `entry`'s say), or leaves the buffer, is refused.
fn chain<'a>(
    buf: &'a [u8],
    mut entry: impl FnMut(&'a [u8], usize) -> Option<usize>,
) -> Result<(), InfoError> {
    let mut at = 0;
    loop {
        let next = u32_at(buf, at).ok_or(InfoError::InvalidParameter)? as usize;
        let least = entry(buf, at).ok_or(InfoError::InvalidParameter)?;
        if next == 0 {
            return Ok(());
        }
        if next < least {
            return Err(InfoError::InvalidParameter);
        }
        at = at.checked_add(next).ok_or(InfoError::InvalidParameter)?;
    }
}

/// Reads an SMB2_QUERY_QUOTA_INFO. A SID list that is not a chain of
/// FILE_GET_QUOTA_INFORMATION, or a start SID outside the buffer, is
/// InvalidParameter (MS-SMB2 3.3.5.20.4).
pub fn parse_query(buf: &[u8]) -> Result<QuotaQuery<'_>, InfoError> {
    if buf.len() < QUERY_FIXED {
        return Err(InfoError::InvalidParameter);
    }
    let field = |at| u32_at(buf, at).map(|v| v as usize);
    let (list_len, start_len, start_offset) = (
        field(4).unwrap_or(0),
        field(8).unwrap_or(0),
        field(12).unwrap_or(0),
    );
    let rest = &buf[QUERY_FIXED..];
    let mut query = QuotaQuery {
        return_single: buf[0] != 0,
        restart_scan: buf[1] != 0,
        sids: Vec::new(),
        start_sid: None,
    };
    if list_len != 0 {
        let list = rest.get(..list_len).ok_or(InfoError::InvalidParameter)?;
        chain(list, |b, at| {
            let len = u32_at(b, at + 4)? as usize;
            query.sids.push(sid(b, at + 8, len)?);
            Some(8 + len)
        })?;
    } else if start_len != 0 {
        let s = sid(rest, start_offset, start_len).ok_or(InfoError::InvalidParameter)?;
        query.start_sid = Some(s);
    }
    Ok(query)
}

/// Reads the FILE_QUOTA_INFORMATION entries of a set.
pub fn parse_entries(buf: &[u8]) -> Result<Vec<QuotaEntry>, InfoError> {
    if buf.is_empty() {
        return Err(InfoError::InvalidParameter);
    }
    let mut entries = Vec::new();
    chain(buf, |b, at| {
        let len = u32_at(b, at + 4)? as usize;
        entries.push(QuotaEntry {
            change_time: u64_at(b, at + 8)?,
            used: u64_at(b, at + 16)?,
            threshold: u64_at(b, at + 24)?,
            limit: u64_at(b, at + 32)?,
            sid: sid(b, at + ENTRY_FIXED, len)?.to_vec(),
        });
        Some(ENTRY_FIXED + len)
    })?;
    Ok(entries)
}

/// Encodes as many of `entries` as fit in `room` bytes, each after the
/// last on an 8-byte boundary: the bytes, and how many went in.
pub fn encode_entries(entries: &[QuotaEntry], room: usize) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut last = None;
    let mut count = 0;
    for e in entries {
        let at = out.len().next_multiple_of(8);
        if at + ENTRY_FIXED + e.sid.len() > room {
            break;
        }
        out.resize(at, 0);
        if let Some(prev) = last {
            let next = (at - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        put_u32(&mut out, 0);
        put_u32(&mut out, e.sid.len() as u32);
        put_u64(&mut out, e.change_time);
        put_u64(&mut out, e.used);
        put_u64(&mut out, e.threshold);
        put_u64(&mut out, e.limit);
        out.extend_from_slice(&e.sid);
        last = Some(at);
        count += 1;
    }
    (out, count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::sids;

    fn entry(uid: u32, used: u64) -> QuotaEntry {
        QuotaEntry {
            sid: sids::unix_user(uid),
            change_time: 0,
            used,
            threshold: NO_LIMIT,
            limit: 1 << 20,
        }
    }

    #[test]
    fn entries_go_back_and_forth_aligned() {
        let all = [entry(1000, 5), entry(1001, 7)];
        let (bytes, n) = encode_entries(&all, 4096);
        assert_eq!(n, 2);
        // 40 + 16 bytes of SID: the second starts at 56, already aligned.
        assert_eq!(u32_at(&bytes, 0), Some(56));
        assert_eq!(bytes.len(), 112);
        assert_eq!(parse_entries(&bytes).unwrap(), all);
    }

    #[test]
    fn only_what_fits_is_encoded() {
        let all = [entry(1000, 5), entry(1001, 7)];
        let (bytes, n) = encode_entries(&all, 100);
        assert_eq!((bytes.len(), n), (56, 1));
        assert_eq!(u32_at(&bytes, 0), Some(0));
        assert_eq!(encode_entries(&all, 55).1, 0);
    }

    fn query(single: bool, list: &[u8], start: Option<(&[u8], u32)>) -> Vec<u8> {
        let mut q = vec![u8::from(single), 1, 0, 0];
        put_u32(&mut q, list.len() as u32);
        let (start_len, start_offset) = start.map_or((0, 0), |(s, o)| (s.len() as u32, o));
        put_u32(&mut q, start_len);
        put_u32(&mut q, start_offset);
        q.extend_from_slice(list);
        if let Some((s, o)) = start {
            q.resize(QUERY_FIXED + o as usize, 0);
            q.extend_from_slice(s);
        }
        q
    }

    fn sid_list(sids: &[Vec<u8>]) -> Vec<u8> {
        let mut list = Vec::new();
        for (i, s) in sids.iter().enumerate() {
            let next = if i + 1 == sids.len() { 0 } else { 8 + s.len() };
            put_u32(&mut list, next as u32);
            put_u32(&mut list, s.len() as u32);
            list.extend_from_slice(s);
        }
        list
    }

    #[test]
    fn a_query_names_its_sids() {
        let (a, b) = (sids::unix_user(1000), sids::EVERYONE.to_vec());
        let q = query(true, &sid_list(&[a.clone(), b.clone()]), None);
        let parsed = parse_query(&q).unwrap();
        assert!(parsed.return_single && parsed.restart_scan);
        assert_eq!(parsed.sids, vec![&a[..], &b[..]]);
        assert_eq!(parsed.start_sid, None);
    }

    #[test]
    fn an_enumeration_may_start_at_a_sid() {
        let a = sids::unix_user(1000);
        let q = query(false, &[], Some((&a, 4)));
        let parsed = parse_query(&q).unwrap();
        assert_eq!(parsed.start_sid, Some(&a[..]));
        assert!(parsed.sids.is_empty());
        assert!(parse_query(&query(false, &[], None))
            .unwrap()
            .start_sid
            .is_none());
    }

    #[test]
    fn bad_queries_are_invalid_parameters() {
        let a = sids::unix_user(1000);
        let bad = InfoError::InvalidParameter;
        assert_eq!(parse_query(&[0; 15]), Err(bad));
        // A list longer than the buffer.
        let mut q = query(false, &sid_list(std::slice::from_ref(&a)), None);
        q[4] += 1;
        assert_eq!(parse_query(&q), Err(bad));
        // A SID length that is not the SID's.
        let mut list = sid_list(std::slice::from_ref(&a));
        list[4] -= 4;
        assert_eq!(parse_query(&query(false, &list, None)), Err(bad));
        // A next entry inside the one before.
        let mut list = sid_list(&[a.clone(), a.clone()]);
        list[0] = 4;
        assert_eq!(parse_query(&query(false, &list, None)), Err(bad));
        // A start SID past the end.
        let mut q = query(false, &[], Some((&a, 0)));
        q[12] = 200;
        assert_eq!(parse_query(&q), Err(bad));
        // A set with nothing in it.
        assert_eq!(parse_entries(&[]), Err(bad));
    }
}
