//! Extended attributes on the wire (MS-FSCC 2.4.15): the
//! FILE_FULL_EA_INFORMATION lists a client sets (SET_INFO, and a CREATE's
//! ExtA context) and a query returns, and the FILE_GET_EA_INFORMATION
//! list that names what a query asks for.

use crate::wire::{get_u16, get_u32, get_u8, patch_u32, put_u16, put_u32, put_u8};
use crate::InfoError;

/// The one flag an EA may carry: the file cannot be understood without
/// it (MS-FSCC 2.4.15).
pub const FILE_NEED_EA: u8 = 0x80;

/// One extended attribute: a name of 1 to 255 bytes and its value. An
/// empty value in a list a client sends removes the EA of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullEa {
    pub flags: u8,
    pub name: String,
    pub value: Vec<u8>,
}

/// The fixed part of a FILE_FULL_EA_INFORMATION entry, before its name.
const FULL_FIXED: usize = 8;
/// The fixed part of a FILE_GET_EA_INFORMATION entry, before its name.
const GET_FIXED: usize = 5;

/// Characters no EA name holds, besides control characters (MS-FSCC
/// 2.4.15, as FAT and NTFS check them).
const NOT_IN_NAMES: &[u8] = b"\"*+,/:;<=>?[\\]|";

/// Whether `name` may name an EA: 1 to 255 bytes of printable ASCII,
/// none of [`NOT_IN_NAMES`].
pub fn valid_ea_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .iter()
            .all(|b| (0x20..0x7F).contains(b) && !NOT_IN_NAMES.contains(b))
}

/// Reads the chain of entries in `buf`, each at the offset its
/// predecessor gives (a multiple of 4, past the predecessor's end, never
/// beyond the buffer), handing `entry` each one's bytes from its start.
fn each_entry<'a>(
    buf: &'a [u8],
    fixed: usize,
    mut entry: impl FnMut(&'a [u8]) -> Result<usize, InfoError>,
) -> Result<(), InfoError> {
    let inconsistent = InfoError::EaListInconsistent;
    let mut at = 0usize;
    loop {
        let rest = buf.get(at..).filter(|r| r.len() >= fixed);
        let rest = rest.ok_or(inconsistent)?;
        let len = entry(rest)?;
        let next = get_u32(rest, 0).ok_or(inconsistent)? as usize;
        if next == 0 {
            return Ok(());
        }
        if next % 4 != 0 || next < len {
            return Err(inconsistent);
        }
        at = at.checked_add(next).ok_or(inconsistent)?;
    }
}

/// A FILE_FULL_EA_INFORMATION list as a client sends it. Entries that do
/// not add up are EaListInconsistent; a name no EA may have, or a flag
/// other than [`FILE_NEED_EA`], is InvalidEaName (MS-FSA 2.1.5.15.5).
pub fn parse_full_ea_list(buf: &[u8]) -> Result<Vec<FullEa>, InfoError> {
    let mut eas = Vec::new();
    each_entry(buf, FULL_FIXED, |e| {
        let inconsistent = InfoError::EaListInconsistent;
        let flags = get_u8(e, 4).ok_or(inconsistent)?;
        let name_len = usize::from(get_u8(e, 5).ok_or(inconsistent)?);
        let value_len = usize::from(get_u16(e, 6).ok_or(inconsistent)?);
        let name_end = FULL_FIXED + name_len;
        // The name ends with a NUL that its length leaves out.
        let len = name_end + 1 + value_len;
        if e.len() < len || e[name_end] != 0 {
            return Err(inconsistent);
        }
        let name = &e[FULL_FIXED..name_end];
        if flags & !FILE_NEED_EA != 0 || !valid_ea_name(name) {
            return Err(InfoError::InvalidEaName);
        }
        eas.push(FullEa {
            flags,
            name: String::from_utf8_lossy(name).into_owned(),
            value: e[name_end + 1..len].to_vec(),
        });
        Ok(len)
    })?;
    Ok(eas)
}

/// The names a FILE_GET_EA_INFORMATION list asks for (MS-FSCC
/// 2.4.15.1), in order.
pub fn parse_get_ea_list(buf: &[u8]) -> Result<Vec<String>, InfoError> {
    let mut names = Vec::new();
    each_entry(buf, GET_FIXED, |e| {
        let inconsistent = InfoError::EaListInconsistent;
        let name_len = usize::from(get_u8(e, 4).ok_or(inconsistent)?);
        let name_end = GET_FIXED + name_len;
        if e.len() <= name_end || e[name_end] != 0 {
            return Err(inconsistent);
        }
        let name = &e[GET_FIXED..name_end];
        if !valid_ea_name(name) {
            return Err(InfoError::InvalidEaName);
        }
        names.push(String::from_utf8_lossy(name).into_owned());
        Ok(name_end + 1)
    })?;
    Ok(names)
}

/// One FILE_FULL_EA_INFORMATION entry, NextEntryOffset 0.
fn put_entry(out: &mut Vec<u8>, ea: &FullEa) {
    let name = &ea.name.as_bytes()[..ea.name.len().min(255)];
    let value = &ea.value[..ea.value.len().min(usize::from(u16::MAX))];
    put_u32(out, 0);
    put_u8(out, ea.flags);
    put_u8(out, name.len() as u8);
    put_u16(out, value.len() as u16);
    out.extend_from_slice(name);
    out.push(0);
    out.extend_from_slice(value);
}

/// The FILE_FULL_EA_INFORMATION list of `eas`, each entry 4-aligned.
pub fn encode_full_ea_list(eas: &[FullEa]) -> Vec<u8> {
    fit_full_ea_list(eas, usize::MAX, false).0
}

/// The size of the list of `eas` ([`encode_full_ea_list`]), which
/// FileEaInformation reports as EaSize.
pub fn full_ea_list_size(eas: &[FullEa]) -> usize {
    let mut size = 0usize;
    for ea in eas {
        size = size.next_multiple_of(4) + FULL_FIXED + ea.name.len() + 1 + ea.value.len();
    }
    size
}

/// The list of as many of `eas` as fit whole in `max` bytes (only the
/// first with `single`), and how many that is.
pub fn fit_full_ea_list(eas: &[FullEa], max: usize, single: bool) -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut last: Option<usize> = None;
    let mut taken = 0;
    for ea in eas {
        if single && taken == 1 {
            break;
        }
        let start = if last.is_some() {
            out.len().next_multiple_of(4)
        } else {
            0
        };
        if start + FULL_FIXED + ea.name.len() + 1 + ea.value.len() > max {
            break;
        }
        out.resize(start, 0);
        if let Some(prev) = last {
            patch_u32(&mut out, prev, (start - prev) as u32);
        }
        put_entry(&mut out, ea);
        last = Some(start);
        taken += 1;
    }
    (out, taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ea(name: &str, value: &[u8]) -> FullEa {
        FullEa {
            flags: 0,
            name: name.into(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn list_round_trips_with_aligned_entries() {
        let eas = [ea("EAONE", b"VALUE1"), ea("SECONDEA", b"ValueTwo")];
        let b = encode_full_ea_list(&eas);
        // 8 + 6 + 6 = 20, next at 20; 8 + 9 + 8 = 25.
        assert_eq!(get_u32(&b, 0), Some(20));
        assert_eq!(&b[4..8], &[0, 5, 6, 0]);
        assert_eq!(&b[8..14], b"EAONE\0");
        assert_eq!(b.len(), 45);
        assert_eq!(full_ea_list_size(&eas), 45);
        assert_eq!(parse_full_ea_list(&b).unwrap(), eas);
    }

    #[test]
    fn fitting_keeps_whole_entries() {
        let eas = [ea("A", b"1"), ea("B", b"2")];
        assert_eq!(fit_full_ea_list(&eas, 10, false).1, 0);
        let (b, n) = fit_full_ea_list(&eas, 11, false);
        assert_eq!((b.len(), n), (11, 1));
        assert_eq!(get_u32(&b, 0), Some(0));
        assert_eq!(fit_full_ea_list(&eas, 100, true).1, 1);
        assert_eq!(fit_full_ea_list(&eas, 100, false).1, 2);
    }

    #[test]
    fn bad_lists_and_names_are_refused() {
        let good = encode_full_ea_list(&[ea("N", b"v")]);
        assert_eq!(
            parse_full_ea_list(&good[..good.len() - 1]),
            Err(InfoError::EaListInconsistent)
        );
        assert_eq!(parse_full_ea_list(&[]), Err(InfoError::EaListInconsistent));
        let mut unaligned = good.clone();
        unaligned[0] = 2;
        assert_eq!(
            parse_full_ea_list(&unaligned),
            Err(InfoError::EaListInconsistent)
        );
        let mut no_nul = good.clone();
        no_nul[9] = b'x';
        assert_eq!(
            parse_full_ea_list(&no_nul),
            Err(InfoError::EaListInconsistent)
        );
        let bad_name = encode_full_ea_list(&[ea("a:b", b"v")]);
        assert_eq!(parse_full_ea_list(&bad_name), Err(InfoError::InvalidEaName));
        let mut bad_flag = good;
        bad_flag[4] = 1;
        assert_eq!(parse_full_ea_list(&bad_flag), Err(InfoError::InvalidEaName));
        assert!(!valid_ea_name(b""));
        assert!(!valid_ea_name(&[b'a'; 256]));
        assert!(valid_ea_name(b"user.Name-1"));
    }

    #[test]
    fn get_list_names() {
        // Two entries: "AB" at 0 (5 + 3 = 8), "C" at 8.
        let mut b = vec![8, 0, 0, 0, 2, b'A', b'B', 0];
        b.extend([0, 0, 0, 0, 1, b'C', 0]);
        assert_eq!(parse_get_ea_list(&b).unwrap(), ["AB", "C"]);
        assert_eq!(
            parse_get_ea_list(&b[..6]),
            Err(InfoError::EaListInconsistent)
        );
    }
}
