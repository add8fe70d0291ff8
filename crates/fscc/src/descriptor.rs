//! Stored NT security descriptors: parsing and writing the self-relative
//! form (MS-DTYP 2.4.6), merging a SET_INFO into what is stored, the
//! access check (MS-DTYP 2.5.3.2) and inheritance onto new objects
//! (MS-DTYP 2.5.3.4).
//!
//! A descriptor is kept as the client sent it except for the parts it
//! replaced, so ACE types this module does not evaluate (object, callback,
//! audit ACEs) survive a round trip.

use crate::security::access::*;
use crate::security::additional_info::*;
use crate::wire::{put_u16, put_u32, put_u8};

pub const SE_DACL_PRESENT: u16 = 0x0004;
pub const SE_SACL_PRESENT: u16 = 0x0010;
pub const SE_DACL_AUTO_INHERIT_REQ: u16 = 0x0100;
pub const SE_SACL_AUTO_INHERIT_REQ: u16 = 0x0200;
pub const SE_DACL_AUTO_INHERITED: u16 = 0x0400;
pub const SE_DACL_PROTECTED: u16 = 0x1000;
const SE_SELF_RELATIVE: u16 = 0x8000;
/// Control bits that describe the DACL and travel with it.
const DACL_CONTROL: u16 = SE_DACL_PRESENT | 0x0008 | SE_DACL_AUTO_INHERITED | SE_DACL_PROTECTED;
/// Control bits that describe the SACL.
const SACL_CONTROL: u16 = SE_SACL_PRESENT | 0x0020 | 0x0800 | 0x2000;
/// Requests a client may send with a descriptor; never stored.
const AUTO_INHERIT_REQ: u16 = SE_DACL_AUTO_INHERIT_REQ | SE_SACL_AUTO_INHERIT_REQ;

pub const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
pub const ACCESS_DENIED_ACE_TYPE: u8 = 1;

pub const OBJECT_INHERIT_ACE: u8 = 0x01;
pub const CONTAINER_INHERIT_ACE: u8 = 0x02;
pub const NO_PROPAGATE_INHERIT_ACE: u8 = 0x04;
pub const INHERIT_ONLY_ACE: u8 = 0x08;
pub const INHERITED_ACE: u8 = 0x10;

const GENERIC_ALL: u32 = 0x1000_0000;
const GENERIC_EXECUTE: u32 = 0x2000_0000;
const GENERIC_WRITE: u32 = 0x4000_0000;
const GENERIC_READ: u32 = 0x8000_0000;
const GENERIC_MASK: u32 = GENERIC_ALL | GENERIC_EXECUTE | GENERIC_WRITE | GENERIC_READ;

/// Well-known SIDs in binary form.
pub mod sids {
    /// S-1-1-0.
    pub const EVERYONE: &[u8] = &[1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
    /// S-1-3-0, replaced by the creator on inheritance.
    pub const CREATOR_OWNER: &[u8] = &[1, 1, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0];
    /// S-1-3-1, replaced by the creator's group on inheritance.
    pub const CREATOR_GROUP: &[u8] = &[1, 1, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0];
    /// S-1-3-4: when present, its ACEs replace the owner's implicit rights.
    pub const OWNER_RIGHTS: &[u8] = &[1, 1, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0];
    /// S-1-5-7.
    pub const ANONYMOUS: &[u8] = &[1, 1, 0, 0, 0, 0, 0, 5, 7, 0, 0, 0];
    /// S-1-5-11.
    pub const AUTHENTICATED_USERS: &[u8] = &[1, 1, 0, 0, 0, 0, 0, 5, 11, 0, 0, 0];

    /// Samba's Unix SIDs: S-1-22-1-uid for users, S-1-22-2-gid for groups.
    pub fn unix_user(uid: u32) -> Vec<u8> {
        unix(1, uid)
    }

    pub fn unix_group(gid: u32) -> Vec<u8> {
        unix(2, gid)
    }

    /// S-1-5-21-a-b-c-rid: an account of the machine whose SID is
    /// S-1-5-21-a-b-c.
    pub fn machine_account(machine: [u32; 3], rid: u32) -> Vec<u8> {
        let mut s = vec![1, 5, 0, 0, 0, 0, 0, 5];
        for sub in [21, machine[0], machine[1], machine[2], rid] {
            s.extend_from_slice(&sub.to_le_bytes());
        }
        s
    }

    fn unix(kind: u32, id: u32) -> Vec<u8> {
        let mut s = vec![1, 2, 0, 0, 0, 0, 0, 22];
        s.extend_from_slice(&kind.to_le_bytes());
        s.extend_from_slice(&id.to_le_bytes());
        s
    }
}

/// Why a descriptor from a client was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescriptorError {
    /// Shorter than the fixed header: STATUS_BUFFER_TOO_SMALL, as Samba
    /// answers.
    Short,
    /// Not revision 1: STATUS_UNKNOWN_REVISION, as Windows'
    /// SeCaptureSecurityDescriptor answers.
    Revision,
    /// Bad offsets or SID: STATUS_INVALID_SECURITY_DESCR.
    Invalid,
    /// An ACL whose size or ACE count does not add up: STATUS_INVALID_ACL.
    InvalidAcl,
}

impl DescriptorError {
    pub fn ntstatus(self) -> u32 {
        match self {
            DescriptorError::Short => 0xC000_0023,
            DescriptorError::Revision => 0xC000_0058,
            DescriptorError::Invalid => 0xC000_0079,
            DescriptorError::InvalidAcl => 0xC000_0077,
        }
    }
}

/// One ACE, kept whole; the accessors read its header and SID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ace(Vec<u8>);

impl Ace {
    pub fn new(kind: u8, flags: u8, mask: u32, sid: &[u8]) -> Ace {
        let mut b = Vec::with_capacity(8 + sid.len());
        put_u8(&mut b, kind);
        put_u8(&mut b, flags);
        put_u16(&mut b, (8 + sid.len()) as u16);
        put_u32(&mut b, mask);
        b.extend_from_slice(sid);
        Ace(b)
    }

    pub fn kind(&self) -> u8 {
        self.0[0]
    }

    pub fn flags(&self) -> u8 {
        self.0[1]
    }

    pub fn mask(&self) -> u32 {
        u32::from_le_bytes([self.0[4], self.0[5], self.0[6], self.0[7]])
    }

    /// Every ACE type has its access mask right after the header.
    fn with_mask(mut self, mask: u32) -> Ace {
        self.0[4..8].copy_from_slice(&mask.to_le_bytes());
        self
    }

    /// The trustee of an allow or deny ACE; None for other types, whose
    /// layout differs.
    pub fn sid(&self) -> Option<&[u8]> {
        match self.kind() {
            ACCESS_ALLOWED_ACE_TYPE | ACCESS_DENIED_ACE_TYPE => sid_at(&self.0, 8),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Descriptor {
    pub control: u16,
    pub owner: Option<Vec<u8>>,
    pub group: Option<Vec<u8>>,
    /// None: no DACL (everything allowed); Some(empty): nothing allowed.
    pub dacl: Option<Vec<Ace>>,
    /// The SACL as sent, header included; kept, never evaluated.
    pub sacl: Option<Vec<u8>>,
}

/// A binary SID at `at`, if well formed.
fn sid_at(buf: &[u8], at: usize) -> Option<&[u8]> {
    let rev = *buf.get(at)?;
    let count = *buf.get(at + 1)? as usize;
    if rev != 1 || count > 15 {
        return None;
    }
    buf.get(at..at + 8 + 4 * count)
}

fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(buf.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

/// The ACL at `at`: its whole bytes and its ACEs.
fn acl_at(buf: &[u8], at: usize) -> Result<(&[u8], Vec<Ace>), DescriptorError> {
    let bad = DescriptorError::InvalidAcl;
    let rev = *buf.get(at).ok_or(bad)?;
    let size = u16_at(buf, at + 2).ok_or(bad)? as usize;
    let count = u16_at(buf, at + 4).ok_or(bad)? as usize;
    if !(2..=4).contains(&rev) || size < 8 {
        return Err(bad);
    }
    let acl = buf.get(at..at + size).ok_or(bad)?;
    // An ACE takes at least 8 bytes: the count cannot ask for more room
    // than the ACL's bytes hold.
    let mut aces = Vec::with_capacity(count.min((size - 8) / 8));
    let mut p = 8;
    for _ in 0..count {
        let len = u16_at(acl, p + 2).ok_or(bad)? as usize;
        if len < 8 || len % 4 != 0 {
            return Err(bad);
        }
        let ace = acl.get(p..p + len).ok_or(bad)?;
        let ace = Ace(ace.to_vec());
        if matches!(ace.kind(), ACCESS_ALLOWED_ACE_TYPE | ACCESS_DENIED_ACE_TYPE)
            && ace.sid().is_none_or(|s| s.len() + 8 > len)
        {
            return Err(bad);
        }
        aces.push(ace);
        p += len;
    }
    Ok((acl, aces))
}

fn encode_acl(aces: &[Ace]) -> Vec<u8> {
    let size: usize = 8 + aces.iter().map(|a| a.0.len()).sum::<usize>();
    let mut out = Vec::with_capacity(size);
    put_u8(&mut out, 2);
    put_u8(&mut out, 0);
    put_u16(&mut out, size as u16);
    put_u16(&mut out, aces.len() as u16);
    put_u16(&mut out, 0);
    for a in aces {
        out.extend_from_slice(&a.0);
    }
    out
}

/// Replaces GENERIC_* bits by the file rights they stand for.
pub fn map_generic(mask: u32) -> u32 {
    let mut m = mask & !GENERIC_MASK;
    if mask & GENERIC_READ != 0 {
        m |= FILE_GENERIC_READ;
    }
    if mask & GENERIC_WRITE != 0 {
        m |= FILE_GENERIC_WRITE;
    }
    if mask & GENERIC_EXECUTE != 0 {
        m |= FILE_GENERIC_EXECUTE;
    }
    if mask & GENERIC_ALL != 0 {
        m |= FILE_ALL_ACCESS;
    }
    m
}

impl Descriptor {
    /// Parses a self-relative descriptor (the form SET_INFO carries).
    pub fn parse(buf: &[u8]) -> Result<Descriptor, DescriptorError> {
        let bad = DescriptorError::Invalid;
        if buf.len() < 20 {
            return Err(DescriptorError::Short);
        }
        if buf[0] != 1 {
            return Err(DescriptorError::Revision);
        }
        let control = u16_at(buf, 2).ok_or(bad)?;
        if control & SE_SELF_RELATIVE == 0 {
            return Err(bad);
        }
        let off = |at: usize| u32_at(buf, at).map(|o| o as usize).ok_or(bad);
        let sid = |o: usize| -> Result<Option<Vec<u8>>, DescriptorError> {
            if o == 0 {
                Ok(None)
            } else {
                sid_at(buf, o).map(|s| Some(s.to_vec())).ok_or(bad)
            }
        };
        let owner = sid(off(4)?)?;
        let group = sid(off(8)?)?;
        let (sacl_off, dacl_off) = (off(12)?, off(16)?);
        let dacl = if control & SE_DACL_PRESENT != 0 && dacl_off != 0 {
            Some(acl_at(buf, dacl_off)?.1)
        } else {
            None
        };
        let sacl = if control & SE_SACL_PRESENT != 0 && sacl_off != 0 {
            Some(acl_at(buf, sacl_off)?.0.to_vec())
        } else {
            None
        };
        Ok(Descriptor {
            control: control & (DACL_CONTROL | SACL_CONTROL | AUTO_INHERIT_REQ),
            owner,
            group,
            dacl,
            sacl,
        })
    }

    /// The self-relative form holding only the parts `info` (SECINFO bits)
    /// asks for.
    pub fn encode(&self, info: u32) -> Vec<u8> {
        let mut control = SE_SELF_RELATIVE;
        let mut body = Vec::new();
        let mut place = |part: &[u8]| {
            let at = 20 + body.len();
            body.extend_from_slice(part);
            at as u32
        };
        let owner_off = match (&self.owner, info & OWNER_SECURITY_INFORMATION != 0) {
            (Some(s), true) => place(s),
            _ => 0,
        };
        let group_off = match (&self.group, info & GROUP_SECURITY_INFORMATION != 0) {
            (Some(s), true) => place(s),
            _ => 0,
        };
        let mut sacl_off = 0;
        if info & SACL_SECURITY_INFORMATION != 0 {
            control |= self.control & SACL_CONTROL;
            if let Some(sacl) = &self.sacl {
                sacl_off = place(sacl);
            }
        }
        let mut dacl_off = 0;
        if info & DACL_SECURITY_INFORMATION != 0 {
            // A NULL DACL (present, no ACL) is told apart from none at all.
            control |= self.control & DACL_CONTROL;
            if let Some(aces) = &self.dacl {
                control |= SE_DACL_PRESENT;
                dacl_off = place(&encode_acl(aces));
            }
        }
        let mut out = Vec::with_capacity(20 + body.len());
        put_u8(&mut out, 1);
        put_u8(&mut out, 0);
        put_u16(&mut out, control);
        put_u32(&mut out, owner_off);
        put_u32(&mut out, group_off);
        put_u32(&mut out, sacl_off);
        put_u32(&mut out, dacl_off);
        out.extend_from_slice(&body);
        out
    }

    /// Takes the parts `info` names from `new`, keeping the rest, as
    /// Windows stores a SET_INFO: a DACL it names is present even when
    /// `new` has none (a NULL DACL), generic rights in the ACEs that apply
    /// to the object are mapped, and the auto-inherit control bits are
    /// canonicalized (see [`dacl_control`]).
    pub fn merge(&mut self, new: Descriptor, info: u32) {
        if info & OWNER_SECURITY_INFORMATION != 0 && new.owner.is_some() {
            self.owner = new.owner;
        }
        if info & GROUP_SECURITY_INFORMATION != 0 && new.group.is_some() {
            self.group = new.group;
        }
        if info & DACL_SECURITY_INFORMATION != 0 {
            self.control = (self.control & !DACL_CONTROL) | dacl_control(new.control);
            self.dacl = new.dacl.map(map_applicable);
        }
        if info & SACL_SECURITY_INFORMATION != 0 {
            self.control = (self.control & !SACL_CONTROL) | (new.control & SACL_CONTROL);
            self.sacl = new.sacl;
        }
    }

    /// Fills the parts this descriptor leaves open (no owner, no group, no
    /// DACL present) from `defaults`: what a stored descriptor does not
    /// decide still comes from the object's ownership and mode.
    pub fn or_defaults(mut self, defaults: Descriptor) -> Descriptor {
        if self.owner.is_none() {
            self.owner = defaults.owner;
        }
        if self.group.is_none() {
            self.group = defaults.group;
        }
        if self.control & SE_DACL_PRESENT == 0 && self.dacl.is_none() {
            self.control = (self.control & !DACL_CONTROL) | (defaults.control & DACL_CONTROL);
            self.dacl = defaults.dacl;
        }
        self
    }

    /// The rights a caller holding `token` (its SIDs) has: the DACL walked
    /// in order, a deny taking away what no earlier allow granted, and the
    /// owner holding READ_CONTROL and WRITE_DAC unless an OWNER RIGHTS ACE
    /// says otherwise.
    pub fn granted(&self, token: &[Vec<u8>]) -> u32 {
        let Some(aces) = &self.dacl else {
            return FILE_ALL_ACCESS;
        };
        let has = |sid: &[u8]| token.iter().any(|t| t == sid);
        let mut granted = 0;
        let mut denied = 0;
        let owner_rights_ace = aces.iter().any(|a| a.sid() == Some(sids::OWNER_RIGHTS));
        if !owner_rights_ace && self.owner.as_deref().is_some_and(has) {
            granted |= READ_CONTROL | WRITE_DAC;
        }
        for ace in aces {
            if ace.flags() & INHERIT_ONLY_ACE != 0 {
                continue;
            }
            let Some(sid) = ace.sid() else { continue };
            let applies =
                has(sid) || (sid == sids::OWNER_RIGHTS && self.owner.as_deref().is_some_and(has));
            if !applies {
                continue;
            }
            let mask = map_generic(ace.mask());
            match ace.kind() {
                ACCESS_ALLOWED_ACE_TYPE => granted |= mask & !denied,
                ACCESS_DENIED_ACE_TYPE => denied |= mask & !granted,
                _ => {}
            }
        }
        granted
    }

    /// Whether a new child would inherit any ACE.
    pub fn has_inheritable(&self) -> bool {
        self.dacl.as_ref().is_some_and(|aces| {
            aces.iter()
                .any(|a| a.flags() & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE) != 0)
        })
    }

    /// The descriptor of a new child of this (directory's) descriptor,
    /// owned by `owner`:`group`; None when nothing is inheritable, in which
    /// case the child keeps no descriptor of its own.
    pub fn inherit(&self, is_dir: bool, owner: &[u8], group: &[u8]) -> Option<Descriptor> {
        let aces = self.dacl.as_ref()?;
        let mut out = Vec::new();
        for ace in aces {
            let f = ace.flags();
            let Some(sid) = ace.sid() else { continue };
            let creator = if sid == sids::CREATOR_OWNER {
                Some(owner)
            } else if sid == sids::CREATOR_GROUP {
                Some(group)
            } else {
                None
            };
            let effective_sid = creator.unwrap_or(sid);
            let effective = |flags: u8| {
                Ace::new(
                    ace.kind(),
                    flags | INHERITED_ACE,
                    map_generic(ace.mask()),
                    effective_sid,
                )
            };
            if is_dir {
                if f & CONTAINER_INHERIT_ACE != 0 {
                    if f & NO_PROPAGATE_INHERIT_ACE != 0 {
                        out.push(effective(0));
                    } else if creator.is_some() || ace.mask() & 0xF000_0000 != 0 {
                        // The effective ACE is made specific; the original
                        // travels on, inherit-only, for grandchildren.
                        out.push(effective(0));
                        let keep = f & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE);
                        out.push(Ace::new(
                            ace.kind(),
                            keep | INHERIT_ONLY_ACE | INHERITED_ACE,
                            ace.mask(),
                            sid,
                        ));
                    } else {
                        let keep = f & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE);
                        out.push(Ace::new(ace.kind(), keep | INHERITED_ACE, ace.mask(), sid));
                    }
                } else if f & OBJECT_INHERIT_ACE != 0 && f & NO_PROPAGATE_INHERIT_ACE == 0 {
                    out.push(Ace::new(
                        ace.kind(),
                        OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE,
                        ace.mask(),
                        sid,
                    ));
                }
            } else if f & OBJECT_INHERIT_ACE != 0 {
                out.push(effective(0));
            }
        }
        if out.is_empty() {
            return None;
        }
        Some(Descriptor {
            control: SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED,
            owner: Some(owner.to_vec()),
            group: Some(group.to_vec()),
            dacl: Some(out),
            sacl: None,
        })
    }
}

/// The DACL control bits Windows keeps of a descriptor a client sends:
/// the DACL is present (a descriptor without one sets a NULL DACL),
/// SE_DACL_AUTO_INHERIT_REQ is a request and never kept, and
/// SE_DACL_AUTO_INHERITED stays only when that request came with it
/// (smbtorture smb2.acls.INHERITFLAGS).
fn dacl_control(sent: u16) -> u16 {
    let mut c = (sent & DACL_CONTROL) | SE_DACL_PRESENT;
    if sent & SE_DACL_AUTO_INHERIT_REQ == 0 {
        c &= !SE_DACL_AUTO_INHERITED;
    }
    c
}

/// Generic rights in the ACEs that apply to the object become the file
/// rights they stand for; inherit-only ACEs keep them for the objects
/// that will inherit them, as Windows stores a DACL.
fn map_applicable(aces: Vec<Ace>) -> Vec<Ace> {
    aces.into_iter()
        .map(|a| {
            if a.flags() & INHERIT_ONLY_ACE != 0 || a.mask() & GENERIC_MASK == 0 {
                a
            } else {
                let mask = map_generic(a.mask());
                a.with_mask(mask)
            }
        })
        .collect()
}

/// Every part a descriptor has.
pub const ALL_PARTS: u32 = OWNER_SECURITY_INFORMATION
    | GROUP_SECURITY_INFORMATION
    | DACL_SECURITY_INFORMATION
    | SACL_SECURITY_INFORMATION;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::security_descriptor;

    fn user() -> Vec<u8> {
        sids::unix_user(0)
    }

    fn dir_sd(mask: u32, flags: u8) -> Descriptor {
        Descriptor {
            control: SE_DACL_PRESENT,
            owner: Some(user()),
            group: None,
            dacl: Some(vec![Ace::new(
                ACCESS_ALLOWED_ACE_TYPE,
                flags,
                mask,
                &user(),
            )]),
            sacl: None,
        }
    }

    #[test]
    fn round_trips_the_mode_descriptor() {
        let bytes = security_descriptor(1000, 100, 0o100644, false, ALL_PARTS);
        let sd = Descriptor::parse(&bytes).unwrap();
        assert_eq!(sd.owner.as_deref(), Some(&sids::unix_user(1000)[..]));
        assert_eq!(sd.dacl.as_ref().unwrap().len(), 3);
        assert_eq!(sd.encode(ALL_PARTS), bytes);
    }

    #[test]
    fn access_check_allows_denies_and_owner_rights() {
        let token = vec![user(), sids::EVERYONE.to_vec()];
        let sd = dir_sd(0x001E_01BF, 0);
        assert_eq!(sd.granted(&token), 0x001E_01BF);
        assert_eq!(sd.granted(&token) & DELETE, 0);
        // A stranger gets nothing, not even the owner's implicit rights.
        assert_eq!(sd.granted(&[sids::unix_user(7)]), 0);

        let mut sd = dir_sd(FILE_ALL_ACCESS, 0);
        sd.dacl.as_mut().unwrap().insert(
            0,
            Ace::new(ACCESS_DENIED_ACE_TYPE, 0, DELETE, sids::EVERYONE),
        );
        assert_eq!(sd.granted(&token), FILE_ALL_ACCESS & !DELETE);

        // Owner with an empty DACL still may read and change it.
        let mut sd = dir_sd(0, 0);
        sd.dacl = Some(vec![]);
        assert_eq!(sd.granted(&token), READ_CONTROL | WRITE_DAC);
        sd.dacl = None;
        assert_eq!(sd.granted(&token), FILE_ALL_ACCESS);
        // Inherit-only ACEs do not apply to the object itself.
        let sd = dir_sd(FILE_ALL_ACCESS, OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE);
        assert_eq!(sd.granted(&token), READ_CONTROL | WRITE_DAC);
        // Generic rights count as what they stand for.
        let sd = dir_sd(GENERIC_READ, 0);
        assert_eq!(sd.granted(&token), FILE_GENERIC_READ | WRITE_DAC);
    }

    #[test]
    fn inheritance_follows_flags() {
        let parent = dir_sd(0x001E_01BF, OBJECT_INHERIT_ACE);
        let group = sids::unix_group(0);
        let file = parent.inherit(false, &user(), &group).unwrap();
        let aces = file.dacl.as_ref().unwrap();
        assert_eq!(aces.len(), 1);
        assert_eq!(aces[0].flags(), INHERITED_ACE);
        assert_eq!(aces[0].mask(), 0x001E_01BF);
        // A subdirectory keeps it inherit-only, for its own files.
        let dir = parent.inherit(true, &user(), &group).unwrap();
        let aces = dir.dacl.as_ref().unwrap();
        assert_eq!(
            aces[0].flags(),
            OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE | INHERITED_ACE
        );
        assert_eq!(dir.granted(&[user()]), READ_CONTROL | WRITE_DAC);
        // Nothing inheritable: no descriptor.
        assert!(dir_sd(FILE_ALL_ACCESS, 0)
            .inherit(false, &user(), &group)
            .is_none());
        // CREATOR OWNER becomes the creator.
        let mut p = dir_sd(GENERIC_ALL, OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE);
        p.dacl = Some(vec![Ace::new(
            ACCESS_ALLOWED_ACE_TYPE,
            OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
            GENERIC_ALL,
            sids::CREATOR_OWNER,
        )]);
        let f = p.inherit(false, &sids::unix_user(5), &group).unwrap();
        assert_eq!(
            f.dacl.as_ref().unwrap()[0].sid(),
            Some(&sids::unix_user(5)[..])
        );
        assert_eq!(f.dacl.as_ref().unwrap()[0].mask(), FILE_ALL_ACCESS);
        let d = p.inherit(true, &sids::unix_user(5), &group).unwrap();
        assert_eq!(d.dacl.as_ref().unwrap().len(), 2);
    }

    /// The ACEs of a descriptor as (sid, mask, flags).
    fn aces(sd: &Descriptor) -> Vec<(Vec<u8>, u32, u8)> {
        sd.dacl
            .as_ref()
            .unwrap()
            .iter()
            .map(|a| (a.sid().unwrap().to_vec(), a.mask(), a.flags()))
            .collect()
    }

    #[test]
    fn set_keeps_what_windows_keeps() {
        let oc = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;
        let sent = |control: u16| Descriptor {
            control: SE_DACL_PRESENT | control,
            owner: None,
            group: None,
            dacl: Some(vec![
                Ace::new(ACCESS_ALLOWED_ACE_TYPE, oc, GENERIC_READ, &user()),
                Ace::new(
                    ACCESS_ALLOWED_ACE_TYPE,
                    oc | INHERIT_ONLY_ACE,
                    GENERIC_ALL,
                    sids::CREATOR_OWNER,
                ),
            ]),
            sacl: None,
        };
        // AUTO_INHERITED stays only with AUTO_INHERIT_REQ, which is never
        // kept; PROTECTED stays (smbtorture smb2.acls.INHERITFLAGS).
        for (control, kept) in [
            (0, 0),
            (SE_DACL_AUTO_INHERITED, 0),
            (SE_DACL_AUTO_INHERIT_REQ, 0),
            (
                SE_DACL_AUTO_INHERITED | SE_DACL_AUTO_INHERIT_REQ,
                SE_DACL_AUTO_INHERITED,
            ),
            (
                SE_DACL_PROTECTED | SE_DACL_AUTO_INHERITED,
                SE_DACL_PROTECTED,
            ),
        ] {
            let mut sd = Descriptor::default();
            let bytes = sent(control).encode(ALL_PARTS);
            let mut raw = bytes.clone();
            // encode never writes AUTO_INHERIT_REQ: put it on the wire.
            raw[2..4]
                .copy_from_slice(&(SE_SELF_RELATIVE | SE_DACL_PRESENT | control).to_le_bytes());
            sd.merge(Descriptor::parse(&raw).unwrap(), DACL_SECURITY_INFORMATION);
            assert_eq!(sd.control, SE_DACL_PRESENT | kept, "sent {control:#x}");
        }
        // Generic rights are mapped where the ACE applies to the object,
        // kept where it is only passed on.
        let mut sd = Descriptor::default();
        sd.merge(sent(0), DACL_SECURITY_INFORMATION);
        assert_eq!(
            aces(&sd),
            [
                (user(), FILE_GENERIC_READ, oc),
                (
                    sids::CREATOR_OWNER.to_vec(),
                    GENERIC_ALL,
                    oc | INHERIT_ONLY_ACE
                ),
            ]
        );
        // A DACL named but not present is a NULL DACL.
        sd.merge(Descriptor::default(), DACL_SECURITY_INFORMATION);
        assert_eq!((sd.control, &sd.dacl), (SE_DACL_PRESENT, &None));
        assert_eq!(sd.granted(&[sids::unix_user(7)]), FILE_ALL_ACCESS);
    }

    #[test]
    fn what_a_stored_descriptor_leaves_open_comes_from_the_mode() {
        let mode =
            Descriptor::parse(&security_descriptor(1, 2, 0o100640, false, ALL_PARTS)).unwrap();
        let stored = Descriptor {
            owner: Some(sids::EVERYONE.to_vec()),
            ..Descriptor::default()
        };
        let shown = stored.or_defaults(mode.clone());
        assert_eq!(shown.owner.as_deref(), Some(sids::EVERYONE));
        assert_eq!(shown.group, mode.group);
        assert_eq!(shown.dacl, mode.dacl);
        assert_eq!(shown.control, SE_DACL_PRESENT);
        // A NULL DACL is a DACL: it stays.
        let null = Descriptor {
            control: SE_DACL_PRESENT,
            ..Descriptor::default()
        };
        assert_eq!(null.or_defaults(mode).dacl, None);
    }

    #[test]
    fn set_merges_only_named_parts() {
        let bytes = security_descriptor(1, 2, 0o100600, false, ALL_PARTS);
        let mut sd = Descriptor::parse(&bytes).unwrap();
        let new = dir_sd(FILE_ALL_ACCESS, 0);
        sd.merge(new.clone(), DACL_SECURITY_INFORMATION);
        assert_eq!(sd.owner.as_deref(), Some(&sids::unix_user(1)[..]));
        assert_eq!(sd.dacl, new.dacl);
        let again = Descriptor::parse(&sd.encode(ALL_PARTS)).unwrap();
        assert_eq!(again, sd);
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(Descriptor::parse(&[1, 0]), Err(DescriptorError::Short));
        let mut b = security_descriptor(1, 2, 0o600, false, ALL_PARTS);
        b[0] = 2;
        assert_eq!(Descriptor::parse(&b), Err(DescriptorError::Revision));
        let mut b = security_descriptor(1, 2, 0o600, false, ALL_PARTS);
        b[4] = 0xF0; // owner offset past the end
        assert_eq!(Descriptor::parse(&b), Err(DescriptorError::Invalid));
        let mut b = security_descriptor(1, 2, 0o600, false, DACL_SECURITY_INFORMATION);
        b[20 + 4] = 9; // ACE count beyond the ACL
        assert_eq!(Descriptor::parse(&b), Err(DescriptorError::InvalidAcl));
        for n in 0..b.len() {
            let _ = Descriptor::parse(&b[..n]);
        }
    }
}
