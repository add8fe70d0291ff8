//! The srvsvc interface (MS-SRVS): the share and server queries that
//! `smbclient -L`, `net view` and Explorer make.

use crate::ndr::{NdrError, NdrReader, NdrWriter};
use crate::{ShareInfo, ShareKind};

pub const OPNUM_NETR_SHARE_ENUM: u16 = 15;
pub const OPNUM_NETR_SHARE_GET_INFO: u16 = 16;
pub const OPNUM_NETR_SERVER_GET_INFO: u16 = 21;

const WERR_OK: u32 = 0;
const WERR_UNKNOWN_LEVEL: u32 = 0x7c;
const WERR_NET_NAME_NOT_FOUND: u32 = 0x906;

const STYPE_DISKTREE: u32 = 0;
const STYPE_IPC: u32 = 3;
/// Set for administrative shares, those whose name ends in '$'.
const STYPE_SPECIAL: u32 = 0x8000_0000;

const PLATFORM_ID_NT: u32 = 500;
const SV_TYPE_WORKSTATION: u32 = 0x1;
const SV_TYPE_SERVER: u32 = 0x2;
const SV_TYPE_NT: u32 = 0x1000;
const SV_TYPE_SERVER_NT: u32 = 0x8000;

/// How a call failed before it could produce a stub: answered by a fault PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    UnknownOpnum,
    BadStub,
}

impl From<NdrError> for CallError {
    fn from(_: NdrError) -> Self {
        CallError::BadStub
    }
}

pub struct Server<'a> {
    pub name: &'a str,
    /// What NetrServerGetInfo's level 101 says of the server (Samba's
    /// `server string`).
    pub comment: &'a str,
    pub shares: &'a [ShareInfo],
}

impl Server<'_> {
    /// Runs one call and returns its response stub.
    pub fn call(&self, opnum: u16, stub: &[u8]) -> Result<Vec<u8>, CallError> {
        match opnum {
            OPNUM_NETR_SHARE_ENUM => self.share_enum(stub),
            OPNUM_NETR_SHARE_GET_INFO => self.share_get_info(stub),
            OPNUM_NETR_SERVER_GET_INFO => self.server_get_info(stub),
            _ => Err(CallError::UnknownOpnum),
        }
    }

    /// Opnum 15, NetrShareEnum (Samba's NetShareEnumAll).
    fn share_enum(&self, stub: &[u8]) -> Result<Vec<u8>, CallError> {
        let mut r = NdrReader::new(stub);
        skip_server_name(&mut r)?;
        // LPSHARE_ENUM_STRUCT: Level, then the union's own copy of it.
        let level = r.u32()?;
        if r.u32()? != level {
            return Err(CallError::BadStub);
        }
        if share_union_has_arm(level) && r.pointer()? {
            skip_share_container(&mut r, level)?;
        }
        let _preferred_max_len = r.u32()?;
        let resume = if r.pointer()? { Some(r.u32()?) } else { None };

        let visible: Vec<ShareInfo> = self
            .shares
            .iter()
            .filter(|s| s.browseable)
            .cloned()
            .collect();
        let start = resume
            .and_then(|h| usize::try_from(h).ok())
            .unwrap_or(0)
            .min(visible.len());
        let listed = visible.get(start..).unwrap_or_default();
        let total = u32::try_from(visible.len()).unwrap_or(u32::MAX);

        let mut w = NdrWriter::new();
        w.u32(level);
        w.u32(level);
        let status = match level {
            0 | 1 => {
                w.pointer(true);
                write_share_container(&mut w, level, listed);
                WERR_OK
            }
            _ => {
                if share_union_has_arm(level) {
                    w.pointer(false);
                }
                WERR_UNKNOWN_LEVEL
            }
        };
        w.u32(if status == WERR_OK { total } else { 0 });
        // PreferedMaximumLength is not honoured: the whole list always fits
        // (Samba ignores it too), so the resume handle goes back as 0.
        if resume.is_some() {
            w.pointer(true);
            w.u32(0);
        } else {
            w.pointer(false);
        }
        w.u32(status);
        Ok(w.finish())
    }

    /// Opnum 16, NetrShareGetInfo.
    fn share_get_info(&self, stub: &[u8]) -> Result<Vec<u8>, CallError> {
        let mut r = NdrReader::new(stub);
        skip_server_name(&mut r)?;
        let net_name = r.string()?;
        let level = r.u32()?;

        let share = self
            .shares
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(&net_name));
        let mut w = NdrWriter::new();
        w.u32(level);
        let status = match share {
            None => WERR_NET_NAME_NOT_FOUND,
            Some(share) if write_share_info(&mut w, level, share) => WERR_OK,
            Some(_) => WERR_UNKNOWN_LEVEL,
        };
        if status != WERR_OK && share_union_has_arm(level) {
            w.pointer(false);
        }
        w.u32(status);
        Ok(w.finish())
    }

    /// Opnum 21, NetrServerGetInfo.
    fn server_get_info(&self, stub: &[u8]) -> Result<Vec<u8>, CallError> {
        let mut r = NdrReader::new(stub);
        skip_server_name(&mut r)?;
        let level = r.u32()?;

        let mut w = NdrWriter::new();
        w.u32(level);
        let status = match level {
            100 => {
                w.pointer(true);
                w.u32(PLATFORM_ID_NT);
                w.pointer(true);
                w.string(self.name);
                WERR_OK
            }
            101 => {
                w.pointer(true);
                w.u32(PLATFORM_ID_NT);
                w.pointer(true);
                w.u32(10);
                w.u32(0);
                w.u32(SV_TYPE_WORKSTATION | SV_TYPE_SERVER | SV_TYPE_NT | SV_TYPE_SERVER_NT);
                w.pointer(true);
                w.string(self.name);
                w.string(self.comment);
                WERR_OK
            }
            _ => {
                // Every level of SERVER_INFO's union is a pointer arm.
                w.pointer(false);
                WERR_UNKNOWN_LEVEL
            }
        };
        w.u32(status);
        Ok(w.finish())
    }
}

/// `[in, string, unique] SRVSVC_HANDLE ServerName`; we are whoever is asked.
fn skip_server_name(r: &mut NdrReader<'_>) -> Result<(), NdrError> {
    if r.pointer()? {
        r.string()?;
    }
    Ok(())
}

/// Levels for which the share-info unions have a (pointer) arm: those of
/// MS-SRVS and of Samba's IDL. Other levels take the empty default arm.
fn share_union_has_arm(level: u32) -> bool {
    matches!(
        level,
        0 | 1 | 2 | 501 | 502 | 503 | 1004 | 1005 | 1006 | 1007 | 1501
    )
}

/// Skips the container a client sends in NetrShareEnum; normally empty
/// (count 0, NULL buffer), but a filled one is legal NDR.
fn skip_share_container(r: &mut NdrReader<'_>, level: u32) -> Result<(), NdrError> {
    let count = r.u32()?;
    if !r.pointer()? {
        return Ok(());
    }
    if r.u32()? != count {
        return Err(NdrError);
    }
    // Pointers per entry: netname (level 0); netname, remark (level 1).
    let mut strings = 0usize;
    for _ in 0..count {
        match level {
            0 => strings += usize::from(r.pointer()?),
            1 => {
                strings += usize::from(r.pointer()?);
                r.u32()?;
                strings += usize::from(r.pointer()?);
            }
            _ => return Err(NdrError),
        }
    }
    for _ in 0..strings {
        r.string()?;
    }
    Ok(())
}

fn share_type(share: &ShareInfo) -> u32 {
    let base = match share.kind {
        ShareKind::Disk => STYPE_DISKTREE,
        ShareKind::Ipc => STYPE_IPC,
    };
    if share.name.ends_with('$') {
        base | STYPE_SPECIAL
    } else {
        base
    }
}

/// The local path as Windows would show it: "C:" + the POSIX path with
/// backslashes, as Samba reports it.
fn windows_path(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let mut out = String::from("C:");
    if !path.starts_with('/') {
        out.push('\\');
    }
    out.extend(path.chars().map(|c| if c == '/' { '\\' } else { c }));
    out
}

/// SHARE_INFO_0_CONTAINER or SHARE_INFO_1_CONTAINER, pointee of the union arm.
fn write_share_container(w: &mut NdrWriter, level: u32, shares: &[ShareInfo]) {
    let count = u32::try_from(shares.len()).unwrap_or(u32::MAX);
    w.u32(count);
    if shares.is_empty() {
        w.pointer(false);
        return;
    }
    w.pointer(true);
    // Conformant array: its size, every element's scalars, then every
    // element's deferred strings in order.
    w.u32(count);
    for share in shares {
        w.pointer(true);
        if level == 1 {
            w.u32(share_type(share));
            w.pointer(true);
        }
    }
    for share in shares {
        w.string(&share.name);
        if level == 1 {
            w.string(&share.comment);
        }
    }
}

/// Writes the union arm (pointer and pointee) of SHARE_INFO for a supported
/// level; returns false, having written nothing, for other levels.
fn write_share_info(w: &mut NdrWriter, level: u32, share: &ShareInfo) -> bool {
    match level {
        0 => {
            w.pointer(true);
            w.pointer(true);
            w.string(&share.name);
        }
        1 | 501 => {
            w.pointer(true);
            w.pointer(true);
            w.u32(share_type(share));
            w.pointer(true);
            if level == 501 {
                w.u32(0); // shi501_flags: no client-side caching policy
            }
            w.string(&share.name);
            w.string(&share.comment);
        }
        2 => {
            w.pointer(true);
            w.pointer(true);
            w.u32(share_type(share));
            w.pointer(true);
            w.u32(0); // shi2_permissions: ignored by servers with user-level security
            w.u32(u32::MAX); // shi2_max_uses: unlimited
            w.u32(0); // shi2_current_uses: not counted
            w.pointer(true);
            w.pointer(false); // shi2_passwd
            w.string(&share.name);
            w.string(&share.comment);
            w.string(&windows_path(&share.path));
        }
        1005 => {
            w.pointer(true);
            w.u32(0); // shi1005_flags
        }
        _ => return false,
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn shares() -> Vec<ShareInfo> {
        vec![
            ShareInfo {
                browseable: true,
                name: "public".into(),
                kind: ShareKind::Disk,
                comment: "Public files".into(),
                path: "/srv/public".into(),
            },
            ShareInfo {
                browseable: true,
                name: "empty".into(),
                kind: ShareKind::Disk,
                comment: String::new(),
                path: "/srv/e".into(),
            },
            ShareInfo {
                browseable: true,
                name: "IPC$".into(),
                kind: ShareKind::Ipc,
                comment: "IPC Service".into(),
                path: String::new(),
            },
        ]
    }

    /// Stub of NetShareEnumAll as Samba's client marshals it
    /// (server "\\host", level `level`, empty container, max 0xffffffff,
    /// resume handle 0).
    pub fn share_enum_request(level: u32) -> Vec<u8> {
        let mut w = NdrWriter::new();
        w.pointer(true);
        w.string("\\\\host");
        w.u32(level);
        w.u32(level);
        w.pointer(true);
        w.u32(0);
        w.pointer(false);
        w.u32(u32::MAX);
        w.pointer(true);
        w.u32(0);
        w.finish()
    }

    #[derive(Debug, PartialEq)]
    pub struct Entry {
        pub name: String,
        pub kind: u32,
        pub comment: String,
    }

    /// Decodes a NetShareEnumAll response following the IDL strictly, as a
    /// client would: (level, entries, total, resume handle, status).
    pub fn decode_share_enum(stub: &[u8]) -> (u32, Vec<Entry>, u32, Option<u32>, u32) {
        let mut r = NdrReader::new(stub);
        let level = r.u32().unwrap();
        assert_eq!(r.u32().unwrap(), level, "union discriminant");
        let mut entries = Vec::new();
        if r.pointer().unwrap() {
            let count = r.u32().unwrap();
            if r.pointer().unwrap() {
                assert_eq!(r.u32().unwrap(), count, "conformance");
                let mut scalars = Vec::new();
                for _ in 0..count {
                    assert!(r.pointer().unwrap());
                    if level == 1 {
                        let kind = r.u32().unwrap();
                        assert!(r.pointer().unwrap());
                        scalars.push(kind);
                    } else {
                        scalars.push(0);
                    }
                }
                for kind in scalars {
                    let name = r.string().unwrap();
                    let comment = if level == 1 {
                        r.string().unwrap()
                    } else {
                        String::new()
                    };
                    entries.push(Entry {
                        name,
                        kind,
                        comment,
                    });
                }
            } else {
                assert_eq!(count, 0);
            }
        }
        let total = r.u32().unwrap();
        let resume = if r.pointer().unwrap() {
            Some(r.u32().unwrap())
        } else {
            None
        };
        let status = r.u32().unwrap();
        assert!(r.u32().is_err(), "trailing bytes");
        (level, entries, total, resume, status)
    }

    /// NetShareEnumAll (level 1, server `\\127.0.0.1`, max_buffer
    /// 0xffffffff, resume handle 0) as Samba 4.17's own NDR marshalling
    /// (python3-samba `ndr_pack_in`) encodes it: what `smbclient -L` sends.
    pub const SAMBA_SHARE_ENUM_ALL_L1: &str = "000002000c000000000000000c0000005c005c00\
        3100320037002e0030002e0030002e00310000000100000001000000040002000000000000000000\
        ffffffff0800020000000000";
    /// NetShareGetInfo (share "public", level 2) marshalled the same way.
    const SAMBA_SHARE_GET_INFO_L2: &str = "000002000c000000000000000c0000005c005c00\
        3100320037002e0030002e0030002e0031000000070000000000000007000000700075006200\
        6c00690063000000000002000000";

    pub fn unhex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .bytes()
            .filter(u8::is_ascii_hexdigit)
            .map(|c| (c as char).to_digit(16).unwrap() as u8)
            .collect();
        digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
    }

    #[test]
    fn samba_marshalled_share_enum_all() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let out = s.call(15, &unhex(SAMBA_SHARE_ENUM_ALL_L1)).unwrap();
        let (level, entries, total, resume, status) = decode_share_enum(&out);
        assert_eq!((level, total, resume, status), (1, 3, Some(0), WERR_OK));
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["public", "empty", "IPC$"]);
    }

    #[test]
    fn samba_marshalled_share_get_info() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let out = s.call(16, &unhex(SAMBA_SHARE_GET_INFO_L2)).unwrap();
        let mut r = NdrReader::new(&out);
        assert_eq!(r.u32().unwrap(), 2);
        assert!(r.pointer().unwrap());
        for _ in 0..7 {
            r.u32().unwrap();
        }
        assert!(!r.pointer().unwrap());
        assert_eq!(r.string().unwrap(), "public");
        assert_eq!(r.string().unwrap(), "Public files");
        assert_eq!(r.string().unwrap(), "C:\\srv\\public");
        assert_eq!(r.u32().unwrap(), WERR_OK);
    }

    fn server() -> (Vec<ShareInfo>, &'static str) {
        (shares(), "HOST")
    }

    #[test]
    fn a_share_that_is_not_browseable_is_not_listed_but_found_by_name() {
        let mut shares = shares();
        shares[0].browseable = false;
        let s = Server {
            name: "HOST",
            comment: "",
            shares: &shares,
        };
        let out = s.call(15, &unhex(SAMBA_SHARE_ENUM_ALL_L1)).unwrap();
        let (_, entries, total, _, status) = decode_share_enum(&out);
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!((names, total, status), (vec!["empty", "IPC$"], 2, WERR_OK));
        let out = s.call(16, &unhex(SAMBA_SHARE_GET_INFO_L2)).unwrap();
        assert_eq!(&out[out.len() - 4..], WERR_OK.to_le_bytes());
    }

    #[test]
    fn share_enum_level1_exact_bytes() {
        let one = vec![ShareInfo {
            browseable: true,
            name: "IPC$".into(),
            kind: ShareKind::Ipc,
            comment: "IPC Service".into(),
            path: String::new(),
        }];
        let s = Server {
            name: "HOST",
            comment: "",
            shares: &one,
        };
        let out = s.call(15, &share_enum_request(1)).unwrap();
        let mut want = Vec::new();
        for v in [
            1u32,
            1,
            0x20000,
            1,
            0x20004,
            1,
            0x20008,
            0x8000_0003,
            0x2000c,
        ] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        for v in [5u32, 0, 5] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(b"I\0P\0C\0$\0\0\0\0\0");
        for v in [12u32, 0, 12] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        for c in "IPC Service\0".encode_utf16() {
            want.extend_from_slice(&c.to_le_bytes());
        }
        for v in [1u32, 0x20010, 0, 0] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(out, want);
    }

    #[test]
    fn share_enum_level1_decodes_back() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let out = s.call(15, &share_enum_request(1)).unwrap();
        let (level, entries, total, resume, status) = decode_share_enum(&out);
        assert_eq!((level, total, resume, status), (1, 3, Some(0), 0));
        assert_eq!(
            entries,
            vec![
                Entry {
                    name: "public".into(),
                    kind: 0,
                    comment: "Public files".into()
                },
                Entry {
                    name: "empty".into(),
                    kind: 0,
                    comment: String::new()
                },
                Entry {
                    name: "IPC$".into(),
                    kind: 0x8000_0003,
                    comment: "IPC Service".into()
                },
            ]
        );
    }

    #[test]
    fn share_enum_level0_and_resume() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let out = s.call(15, &share_enum_request(0)).unwrap();
        let (level, entries, total, _, status) = decode_share_enum(&out);
        assert_eq!((level, total, status), (0, 3, 0));
        let names: Vec<_> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["public", "empty", "IPC$"]);

        // Resume handle 2: the listing starts at the third share.
        let mut req = share_enum_request(1);
        let n = req.len();
        req[n - 4..].copy_from_slice(&2u32.to_le_bytes());
        let (_, entries, total, resume, _) = decode_share_enum(&s.call(15, &req).unwrap());
        assert_eq!(total, 3);
        assert_eq!(resume, Some(0));
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].name, "IPC$");

        // Past the end: an empty container with a NULL array.
        req[n - 4..].copy_from_slice(&9u32.to_le_bytes());
        let (_, entries, _, _, status) = decode_share_enum(&s.call(15, &req).unwrap());
        assert!(entries.is_empty());
        assert_eq!(status, 0);
    }

    #[test]
    fn share_enum_unknown_level() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let out = s.call(15, &share_enum_request(2)).unwrap();
        let (level, entries, total, resume, status) = decode_share_enum(&out);
        assert_eq!(level, 2);
        assert!(entries.is_empty());
        assert_eq!((total, resume, status), (0, Some(0), WERR_UNKNOWN_LEVEL));
    }

    #[test]
    fn share_enum_without_resume_handle() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let mut req = share_enum_request(1);
        let n = req.len();
        req.truncate(n - 8);
        req.extend_from_slice(&0u32.to_le_bytes());
        let (_, entries, _, resume, status) = decode_share_enum(&s.call(15, &req).unwrap());
        assert_eq!(entries.len(), 3);
        assert_eq!((resume, status), (None, 0));
    }

    #[test]
    fn share_enum_accepts_filled_container() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let mut w = NdrWriter::new();
        w.pointer(false);
        w.u32(1);
        w.u32(1);
        w.pointer(true);
        w.u32(1);
        w.pointer(true);
        w.u32(1);
        w.pointer(true);
        w.u32(0);
        w.pointer(true);
        w.string("x");
        w.string("y");
        w.u32(1000);
        w.pointer(false);
        let (_, entries, _, _, status) = decode_share_enum(&s.call(15, &w.finish()).unwrap());
        assert_eq!((entries.len(), status), (3, 0));
    }

    #[test]
    fn share_enum_rejects_mismatched_union_switch() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let mut req = share_enum_request(1);
        // level is after the pointer (4) and the "\\host" string (12 + 14, pad 2)
        req[32..36].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(s.call(15, &req), Err(CallError::BadStub));
    }

    fn get_info_request(share: &str, level: u32) -> Vec<u8> {
        let mut w = NdrWriter::new();
        w.pointer(true);
        w.string("\\\\host");
        w.string(share);
        w.u32(level);
        w.finish()
    }

    #[test]
    fn share_get_info_levels() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        // Level 2, name matched case-insensitively.
        let out = s.call(16, &get_info_request("PUBLIC", 2)).unwrap();
        let mut r = NdrReader::new(&out);
        assert_eq!(r.u32().unwrap(), 2);
        assert!(r.pointer().unwrap());
        assert!(r.pointer().unwrap());
        assert_eq!(r.u32().unwrap(), STYPE_DISKTREE);
        assert!(r.pointer().unwrap());
        assert_eq!(r.u32().unwrap(), 0);
        assert_eq!(r.u32().unwrap(), u32::MAX);
        assert_eq!(r.u32().unwrap(), 0);
        assert!(r.pointer().unwrap());
        assert!(!r.pointer().unwrap(), "no password");
        assert_eq!(r.string().unwrap(), "public");
        assert_eq!(r.string().unwrap(), "Public files");
        assert_eq!(r.string().unwrap(), "C:\\srv\\public");
        assert_eq!(r.u32().unwrap(), WERR_OK);
        assert!(r.u32().is_err());

        // Level 0
        let out = s.call(16, &get_info_request("IPC$", 0)).unwrap();
        let mut r = NdrReader::new(&out);
        assert_eq!(r.u32().unwrap(), 0);
        assert!(r.pointer().unwrap());
        assert!(r.pointer().unwrap());
        assert_eq!(r.string().unwrap(), "IPC$");
        assert_eq!(r.u32().unwrap(), WERR_OK);

        // Level 1 and 501
        for level in [1, 501] {
            let out = s.call(16, &get_info_request("ipc$", level)).unwrap();
            let mut r = NdrReader::new(&out);
            assert_eq!(r.u32().unwrap(), level);
            assert!(r.pointer().unwrap());
            assert!(r.pointer().unwrap());
            assert_eq!(r.u32().unwrap(), 0x8000_0003);
            assert!(r.pointer().unwrap());
            if level == 501 {
                assert_eq!(r.u32().unwrap(), 0);
            }
            assert_eq!(r.string().unwrap(), "IPC$");
            assert_eq!(r.string().unwrap(), "IPC Service");
            assert_eq!(r.u32().unwrap(), WERR_OK);
            assert!(r.u32().is_err());
        }

        // Level 1005
        let out = s.call(16, &get_info_request("empty", 1005)).unwrap();
        let mut want = Vec::new();
        for v in [1005u32, 0x20000, 0, 0] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(out, want);
    }

    #[test]
    fn share_get_info_errors() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        let out = s.call(16, &get_info_request("nope", 1)).unwrap();
        let mut want = Vec::new();
        for v in [1u32, 0, WERR_NET_NAME_NOT_FOUND] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(out, want);

        let out = s.call(16, &get_info_request("public", 502)).unwrap();
        let mut want = Vec::new();
        for v in [502u32, 0, WERR_UNKNOWN_LEVEL] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(out, want);

        // A level with no union arm has nothing between switch and status.
        let out = s.call(16, &get_info_request("public", 7)).unwrap();
        let mut want = Vec::new();
        for v in [7u32, WERR_UNKNOWN_LEVEL] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(out, want);
    }

    #[test]
    fn server_get_info_101() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "Family NAS",
            shares: &shares,
        };
        let mut w = NdrWriter::new();
        w.pointer(false);
        w.u32(101);
        let out = s.call(21, &w.finish()).unwrap();
        let mut r = NdrReader::new(&out);
        assert_eq!(r.u32().unwrap(), 101);
        assert!(r.pointer().unwrap());
        assert_eq!(r.u32().unwrap(), 500);
        assert!(r.pointer().unwrap());
        assert_eq!(r.u32().unwrap(), 10);
        assert_eq!(r.u32().unwrap(), 0);
        assert_eq!(r.u32().unwrap(), 0x9003);
        assert!(r.pointer().unwrap());
        assert_eq!(r.string().unwrap(), "HOST");
        assert_eq!(r.string().unwrap(), "Family NAS");
        assert_eq!(r.u32().unwrap(), WERR_OK);
        assert!(r.u32().is_err());
    }

    #[test]
    fn unknown_opnum_and_bad_stub() {
        let (shares, name) = server();
        let s = Server {
            name,
            comment: "",
            shares: &shares,
        };
        assert_eq!(s.call(0, &[]), Err(CallError::UnknownOpnum));
        assert_eq!(s.call(15, &[1, 0]), Err(CallError::BadStub));
        assert_eq!(s.call(16, &[]), Err(CallError::BadStub));
        let req = share_enum_request(1);
        for n in 0..req.len() {
            assert_eq!(s.call(15, &req[..n]), Err(CallError::BadStub), "prefix {n}");
        }
    }

    #[test]
    fn windows_paths() {
        assert_eq!(windows_path("/srv/a/b"), "C:\\srv\\a\\b");
        assert_eq!(windows_path("/"), "C:\\");
        assert_eq!(windows_path("rel/x"), "C:\\rel\\x");
        assert_eq!(windows_path(""), "");
    }
}
