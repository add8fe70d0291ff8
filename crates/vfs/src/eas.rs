//! Extended attributes as Windows keeps them with a file: a short list of
//! named values, names unique without regard to case.

use crate::names::fold;

/// One extended attribute of an object. Its value is never empty: an
/// empty value, given to [`crate::Vfs::set_eas`], removes the EA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ea {
    /// FILE_NEED_EA or nothing (MS-FSCC 2.4.15); kept, not acted on.
    pub flags: u8,
    pub name: String,
    pub value: Vec<u8>,
}

/// Applies `changes` to `set` in order: an EA whose name matches one in
/// the set without regard to case takes its place (at the end, as NTFS
/// lists a replaced EA); one with an empty value is only removed.
pub fn merge(set: &mut Vec<Ea>, changes: &[Ea]) {
    for change in changes {
        let name = fold(&change.name);
        set.retain(|ea| fold(&ea.name) != name);
        if !change.value.is_empty() {
            set.push(change.clone());
        }
    }
}

/// The set as one value, for backends that keep it whole, packed as
/// Windows lists EAs (MS-FSCC 2.4.15, FILE_FULL_EA_INFORMATION): per
/// EA, at a multiple of 4 bytes, the offset of the next (0 for the
/// last), its flags, name length (1 byte), value length (2 bytes,
/// little-endian), name, a NUL and value. Its length is then the EaSize
/// clients are told ([`FileStat::ea_size`](crate::FileStat)) without
/// reading it.
pub fn encode(set: &[Ea]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    let mut last: Option<usize> = None;
    for ea in set {
        let name = &ea.name.as_bytes()[..ea.name.len().min(255)];
        let value = &ea.value[..ea.value.len().min(usize::from(u16::MAX))];
        let start = if last.is_some() {
            out.len().next_multiple_of(4)
        } else {
            0
        };
        out.resize(start, 0);
        if let Some(prev) = last {
            let next = (start - prev) as u32;
            out[prev..prev + 4].copy_from_slice(&next.to_le_bytes());
        }
        out.extend_from_slice(&[0; 4]);
        out.push(ea.flags);
        out.push(name.len() as u8);
        out.extend_from_slice(&(value.len() as u16).to_le_bytes());
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(value);
        last = Some(start);
    }
    out
}

/// The set [`encode`] made; what does not add up at the end (written by
/// something else) is left out.
pub fn decode(b: &[u8]) -> Vec<Ea> {
    let mut set = Vec::new();
    let mut at = 0usize;
    while let Some([n0, n1, n2, n3, flags, name_len, v0, v1, rest @ ..]) = b.get(at..) {
        let next = u32::from_le_bytes([*n0, *n1, *n2, *n3]) as usize;
        let name_len = usize::from(*name_len);
        let value_len = usize::from(u16::from_le_bytes([*v0, *v1]));
        let Some((name, rest)) = rest.split_at_checked(name_len) else {
            break;
        };
        let Some(value) = rest.get(1..1 + value_len) else {
            break;
        };
        set.push(Ea {
            flags: *flags,
            name: String::from_utf8_lossy(name).into_owned(),
            value: value.to_vec(),
        });
        if next == 0 {
            break;
        }
        at += next;
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ea(name: &str, value: &[u8]) -> Ea {
        Ea {
            flags: 0,
            name: name.into(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn merge_replaces_and_removes_by_name_in_any_case() {
        let mut set = vec![ea("ONE", b"1"), ea("TWO", b"2")];
        merge(
            &mut set,
            &[ea("one", b"uno"), ea("Two", b""), ea("ZERO", b"")],
        );
        assert_eq!(set, [ea("one", b"uno")]);
    }

    #[test]
    fn encoding_round_trips_as_windows_packs_eas() {
        let set = vec![ea("A", b"1"), ea("NAME", &[0, 1, 2])];
        let b = encode(&set);
        // 8 + 2 + 1 = 11, the next at 12; 8 + 5 + 3 = 16.
        assert_eq!(&b[..4], &12u32.to_le_bytes());
        assert_eq!(b.len(), 28);
        assert_eq!(decode(&b), set);
        assert_eq!(decode(&b[..b.len() - 1]), set[..1]);
        assert!(encode(&[]).is_empty());
    }
}
