//! Extended attributes as Windows keeps them with a file: a short list of
//! named values, names unique without regard to case.

use crate::names::fold;

/// One extended attribute of an object, as the wire carries it. Its
/// value is never empty: an empty value, given to
/// [`crate::Vfs::set_eas`], removes the EA.
pub use copyless_fscc::ea::FullEa as Ea;

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

/// The set as one value, for backends that keep it whole: the
/// FILE_FULL_EA_INFORMATION list Windows answers a query with (MS-FSCC
/// 2.4.15), so that its length is the EaSize clients are told
/// ([`FileStat::ea_size`](crate::FileStat)) without reading it.
pub fn encode(set: &[Ea]) -> Vec<u8> {
    copyless_fscc::ea::encode_full_ea_list(set)
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
