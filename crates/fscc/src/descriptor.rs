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
/// The largest ACL the 16-bit AclSize can describe.
const MAX_ACL: usize = u16::MAX as usize;

pub const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
pub const ACCESS_DENIED_ACE_TYPE: u8 = 1;

pub const OBJECT_INHERIT_ACE: u8 = 0x01;
pub const CONTAINER_INHERIT_ACE: u8 = 0x02;
pub const NO_PROPAGATE_INHERIT_ACE: u8 = 0x04;
pub const INHERIT_ONLY_ACE: u8 = 0x08;
pub const INHERITED_ACE: u8 = 0x10;

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
    /// Inheritance would make an ACL larger than an ACL can be:
    /// STATUS_BAD_INHERITANCE_ACL, as Windows answers when an inherited
    /// ACL cannot be built.
    BadInheritance,
}

impl DescriptorError {
    pub fn ntstatus(self) -> u32 {
        match self {
            DescriptorError::Short => 0xC000_0023,
            DescriptorError::Revision => 0xC000_0058,
            DescriptorError::Invalid => 0xC000_0079,
            DescriptorError::InvalidAcl => 0xC000_0077,
            DescriptorError::BadInheritance => 0xC000_007D,
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

    fn len(&self) -> usize {
        self.0.len()
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

    /// The descriptor of a new object (MS-DTYP 2.5.3.4.1
    /// CreateSecurityDescriptor, as NTFS runs it for a CREATE): from the
    /// descriptor of its parent directory, if it has one, and the one its
    /// creator sent (the SecD create context), if any.
    ///
    /// `owner` and `group` are who the object belongs to; the creator's
    /// owner and group, when it names them, take their place. They stand in
    /// for CREATOR OWNER and CREATOR GROUP.
    ///
    /// - The creator's DACL, when present, is the object's, its generic
    ///   rights mapped; when the parent's DACL is auto-inherited and the
    ///   creator's is not protected, the parent's inheritable ACEs follow
    ///   the creator's own (those the creator marked inherited are
    ///   dropped), and the new DACL is auto-inherited too.
    /// - Otherwise the object gets what it inherits from the parent, if
    ///   anything.
    /// - Otherwise no DACL is stored and the object's mode decides.
    ///
    /// NTFS inherits automatically only below a DACL that is itself
    /// auto-inherited: only then are inherited ACEs marked INHERITED_ACE
    /// and the new DACL SE_DACL_AUTO_INHERITED (smbtorture
    /// smb2.acls.INHERITFLAGS).
    ///
    /// Parts that neither decides are left out. None when nothing is left
    /// to store.
    pub fn for_new_object(
        parent: Option<&Descriptor>,
        creator: Option<&Descriptor>,
        is_dir: bool,
        owner: &[u8],
        group: &[u8],
    ) -> Result<Option<Descriptor>, DescriptorError> {
        let owner = creator.and_then(|c| c.owner.as_deref()).unwrap_or(owner);
        let group = creator.and_then(|c| c.group.as_deref()).unwrap_or(group);
        let auto = parent.is_some_and(|p| p.control & SE_DACL_AUTO_INHERITED != 0);
        let inherited =
            parent.map_or_else(Vec::new, |p| p.inherited_by(is_dir, owner, group, auto));
        let mut control = 0;
        let dacl = match creator.filter(|c| c.control & SE_DACL_PRESENT != 0) {
            Some(c) => {
                control = dacl_control(c.control);
                let mut dacl = c.dacl.clone().map(map_applicable);
                if let Some(aces) = dacl.as_mut() {
                    if auto && control & SE_DACL_PROTECTED == 0 && !inherited.is_empty() {
                        aces.retain(|a| a.flags() & INHERITED_ACE == 0);
                        aces.extend(inherited);
                        control |= SE_DACL_AUTO_INHERITED;
                    }
                }
                dacl
            }
            None if !inherited.is_empty() => {
                control = SE_DACL_PRESENT | if auto { SE_DACL_AUTO_INHERITED } else { 0 };
                Some(inherited)
            }
            None => None,
        };
        if dacl
            .as_ref()
            .is_some_and(|aces| 8 + aces.iter().map(Ace::len).sum::<usize>() > MAX_ACL)
        {
            return Err(DescriptorError::BadInheritance);
        }
        let mut sacl = None;
        if let Some(c) = creator.filter(|c| c.control & SE_SACL_PRESENT != 0) {
            control |= c.control & SACL_CONTROL;
            sacl = c.sacl.clone();
        }
        let sd = Descriptor {
            control,
            owner: creator.and_then(|c| c.owner.clone()),
            group: creator.and_then(|c| c.group.clone()),
            dacl,
            sacl,
        };
        Ok((sd != Descriptor::default()).then_some(sd))
    }

    /// The ACEs a new child inherits from this (directory's) DACL, the
    /// child owned by `owner`:`group` (MS-DTYP 2.5.3.4.3
    /// ComputeInheritedACLfromParent). `mark` says whether they are marked
    /// INHERITED_ACE.
    ///
    /// A file takes every object-inheritable ACE as an effective one. A
    /// directory takes container-inheritable ACEs as effective ones, and
    /// keeps passing on what is to be inherited further: an ACE that names
    /// CREATOR OWNER or CREATOR GROUP or holds generic rights is split
    /// into the effective ACE (the creator substituted, the rights mapped)
    /// and the original, inherit-only, for its own children. An
    /// object-inheritable ACE that is not container-inheritable stays
    /// inherit-only, for its files. NO_PROPAGATE_INHERIT stops all of that
    /// after one level.
    fn inherited_by(&self, is_dir: bool, owner: &[u8], group: &[u8], mark: bool) -> Vec<Ace> {
        let Some(aces) = &self.dacl else {
            return Vec::new();
        };
        let mark = if mark { INHERITED_ACE } else { 0 };
        let mut out = Vec::new();
        for ace in aces {
            let f = ace.flags();
            // Object ACEs and audit ACEs are laid out differently; they are
            // kept where a client put them, never inherited.
            let Some(sid) = ace.sid() else { continue };
            let creator = if sid == sids::CREATOR_OWNER {
                Some(owner)
            } else if sid == sids::CREATOR_GROUP {
                Some(group)
            } else {
                None
            };
            let effective = || {
                Ace::new(
                    ace.kind(),
                    mark,
                    map_generic(ace.mask()),
                    creator.unwrap_or(sid),
                )
            };
            let passed_on = |flags: u8| Ace::new(ace.kind(), flags | mark, ace.mask(), sid);
            let inherit_flags = f & (OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE);
            let propagates = f & NO_PROPAGATE_INHERIT_ACE == 0;
            if !is_dir {
                if f & OBJECT_INHERIT_ACE != 0 {
                    out.push(effective());
                }
            } else if f & CONTAINER_INHERIT_ACE != 0 {
                if !propagates {
                    out.push(effective());
                } else if creator.is_some() || ace.mask() & GENERIC_MASK != 0 {
                    out.push(effective());
                    out.push(passed_on(inherit_flags | INHERIT_ONLY_ACE));
                } else {
                    out.push(passed_on(inherit_flags));
                }
            } else if f & OBJECT_INHERIT_ACE != 0 && propagates {
                out.push(passed_on(OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE));
            }
        }
        out
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

    /// A parent directory's DACL: `aces` as (sid, mask, flags), allow
    /// ACEs, auto-inherited or not.
    fn parent(aces: &[(&[u8], u32, u8)], auto: bool) -> Descriptor {
        Descriptor {
            control: SE_DACL_PRESENT | if auto { SE_DACL_AUTO_INHERITED } else { 0 },
            owner: Some(user()),
            group: None,
            dacl: Some(
                aces.iter()
                    .map(|&(sid, mask, flags)| Ace::new(ACCESS_ALLOWED_ACE_TYPE, flags, mask, sid))
                    .collect(),
            ),
            sacl: None,
        }
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

    fn child(
        parent: &Descriptor,
        creator: Option<&Descriptor>,
        is_dir: bool,
    ) -> Option<Descriptor> {
        Descriptor::for_new_object(
            Some(parent),
            creator,
            is_dir,
            &creator_sid(),
            &sids::unix_group(9),
        )
        .unwrap()
    }

    fn creator_sid() -> Vec<u8> {
        sids::unix_user(5)
    }

    /// What a new file and a new directory inherit of a CREATOR OWNER ACE,
    /// for every combination of inheritance flags (the table of smbtorture
    /// smb2.acls.INHERITANCE, which Windows passes).
    #[test]
    fn inheritance_follows_the_flags_as_windows_does() {
        const OI: u8 = OBJECT_INHERIT_ACE;
        const CI: u8 = CONTAINER_INHERIT_ACE;
        const NP: u8 = NO_PROPAGATE_INHERIT_ACE;
        const IO: u8 = INHERIT_ONLY_ACE;
        let me = creator_sid();
        let co = sids::CREATOR_OWNER.to_vec();
        let w = FILE_WRITE_DATA;
        // Parent flags; what a file gets; what a directory gets: (trustee,
        // flags) of each ACE.
        type Inherited<'a> = &'a [(&'a Vec<u8>, u8)];
        #[rustfmt::skip]
        let table: &[(u8, Inherited, Inherited)] = &[
            (0, &[], &[]),
            (OI, &[(&me, 0)], &[(&co, OI | IO)]),
            (CI, &[], &[(&me, 0), (&co, CI | IO)]),
            (OI | CI, &[(&me, 0)], &[(&me, 0), (&co, OI | CI | IO)]),
            (NP, &[], &[]),
            (NP | OI, &[(&me, 0)], &[]),
            (NP | CI, &[], &[(&me, 0)]),
            (NP | CI | OI, &[(&me, 0)], &[(&me, 0)]),
            (IO, &[], &[]),
            (IO | OI, &[(&me, 0)], &[(&co, OI | IO)]),
            (IO | CI, &[], &[(&me, 0), (&co, CI | IO)]),
            (IO | CI | OI, &[(&me, 0)], &[(&me, 0), (&co, OI | CI | IO)]),
            (IO | NP, &[], &[]),
            (IO | NP | OI, &[(&me, 0)], &[]),
            (IO | NP | CI, &[], &[(&me, 0)]),
            (IO | NP | CI | OI, &[(&me, 0)], &[(&me, 0)]),
        ];
        for &(flags, file, dir) in table {
            // Everyone's ACE is not inheritable: it never shows below.
            let p = parent(
                &[
                    (sids::CREATOR_OWNER, w, flags),
                    (sids::EVERYONE, FILE_ALL_ACCESS, 0),
                ],
                false,
            );
            for (is_dir, want) in [(false, file), (true, dir)] {
                let got = child(&p, None, is_dir);
                let want: Vec<_> = want.iter().map(|&(sid, f)| (sid.clone(), w, f)).collect();
                if want.is_empty() {
                    assert_eq!(
                        got, None,
                        "flags {flags:#x}, dir {is_dir}: nothing inherited"
                    );
                } else {
                    let got = got.unwrap();
                    assert_eq!(aces(&got), want, "flags {flags:#x}, dir {is_dir}");
                    assert_eq!(got.control, SE_DACL_PRESENT, "flags {flags:#x}");
                    assert_eq!(got.owner, None, "the owner stays the file's own");
                }
            }
        }
    }

    #[test]
    fn generic_rights_are_mapped_where_they_apply_and_passed_on_as_they_are() {
        let p = parent(
            &[
                (
                    sids::EVERYONE,
                    GENERIC_READ,
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                ),
                (
                    sids::CREATOR_GROUP,
                    GENERIC_ALL,
                    CONTAINER_INHERIT_ACE | INHERIT_ONLY_ACE,
                ),
                (
                    &user(),
                    FILE_ALL_ACCESS,
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                ),
            ],
            false,
        );
        let file = child(&p, None, false).unwrap();
        assert_eq!(
            aces(&file),
            [
                (sids::EVERYONE.to_vec(), FILE_GENERIC_READ, 0),
                (user(), FILE_ALL_ACCESS, 0)
            ]
        );
        let dir = child(&p, None, true).unwrap();
        let oc = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;
        assert_eq!(
            aces(&dir),
            [
                (sids::EVERYONE.to_vec(), FILE_GENERIC_READ, 0),
                (sids::EVERYONE.to_vec(), GENERIC_READ, oc | INHERIT_ONLY_ACE),
                (sids::unix_group(9), FILE_ALL_ACCESS, 0),
                (
                    sids::CREATOR_GROUP.to_vec(),
                    GENERIC_ALL,
                    CONTAINER_INHERIT_ACE | INHERIT_ONLY_ACE
                ),
                // Nothing to substitute or map: one ACE that applies and
                // passes on.
                (user(), FILE_ALL_ACCESS, oc),
            ]
        );
        // What the subdirectory passes on, its own children inherit alike.
        assert_eq!(aces(&child(&dir, None, false).unwrap()), aces(&file));
    }

    #[test]
    fn only_an_auto_inherited_dacl_marks_what_it_passes_on() {
        let oc = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;
        let mut p = parent(
            &[(&user(), FILE_WRITE_DATA | WRITE_DAC, oc | INHERITED_ACE)],
            true,
        );
        p.control |= SE_DACL_PROTECTED;
        let file = child(&p, None, false).unwrap();
        assert_eq!(file.control, SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED);
        assert_eq!(
            aces(&file),
            [(user(), FILE_WRITE_DATA | WRITE_DAC, INHERITED_ACE)]
        );
        let dir = child(&p, None, true).unwrap();
        assert_eq!(aces(&dir)[0].2, oc | INHERITED_ACE);
        // Not auto-inherited: nothing is marked, even what the parent
        // itself marked inherited.
        p.control &= !SE_DACL_AUTO_INHERITED;
        let file = child(&p, None, false).unwrap();
        assert_eq!(file.control, SE_DACL_PRESENT);
        assert_eq!(aces(&file)[0].2, 0);
        assert_eq!(aces(&child(&p, None, true).unwrap())[0].2, oc);
    }

    #[test]
    fn a_creator_descriptor_decides_what_it_names() {
        let oi = OBJECT_INHERIT_ACE;
        let p = parent(&[(sids::EVERYONE, FILE_GENERIC_READ, oi)], true);
        let creator = Descriptor {
            control: SE_DACL_PRESENT,
            owner: Some(sids::EVERYONE.to_vec()),
            group: None,
            dacl: Some(vec![
                Ace::new(
                    ACCESS_ALLOWED_ACE_TYPE,
                    0,
                    GENERIC_ALL,
                    sids::AUTHENTICATED_USERS,
                ),
                // Claimed inherited: dropped, the parent's own follow.
                Ace::new(
                    ACCESS_ALLOWED_ACE_TYPE,
                    INHERITED_ACE,
                    FILE_ALL_ACCESS,
                    &user(),
                ),
            ]),
            sacl: None,
        };
        let got = child(&p, Some(&creator), false).unwrap();
        assert_eq!(got.owner.as_deref(), Some(sids::EVERYONE));
        assert_eq!(got.group, None);
        assert_eq!(got.control, SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED);
        assert_eq!(
            aces(&got),
            [
                (sids::AUTHENTICATED_USERS.to_vec(), FILE_ALL_ACCESS, 0),
                (sids::EVERYONE.to_vec(), FILE_GENERIC_READ, INHERITED_ACE),
            ]
        );
        // A protected DACL, or a parent that is not auto-inherited: the
        // creator's ACEs alone, as sent (generic rights mapped).
        let mut protected = creator.clone();
        protected.control |= SE_DACL_PROTECTED;
        let got = child(&p, Some(&protected), false).unwrap();
        assert_eq!(got.control, SE_DACL_PRESENT | SE_DACL_PROTECTED);
        assert_eq!(aces(&got).len(), 2);
        assert_eq!(aces(&got)[0].1, FILE_ALL_ACCESS);
        let plain = parent(&[(sids::EVERYONE, FILE_GENERIC_READ, oi)], false);
        assert_eq!(
            aces(&child(&plain, Some(&creator), false).unwrap()).len(),
            2
        );
        // CREATOR OWNER stands for the owner the creator names.
        let co = parent(&[(sids::CREATOR_OWNER, FILE_GENERIC_READ, oi)], false);
        let owner_only = Descriptor {
            owner: Some(sids::EVERYONE.to_vec()),
            ..Descriptor::default()
        };
        let got = child(&co, Some(&owner_only), false).unwrap();
        assert_eq!(
            aces(&got),
            [(sids::EVERYONE.to_vec(), FILE_GENERIC_READ, 0)]
        );
        // No DACL from the creator and none inherited: left to the mode.
        let none = parent(&[(sids::EVERYONE, FILE_GENERIC_READ, 0)], true);
        let empty = Descriptor::default();
        assert_eq!(child(&none, Some(&empty), true), None);
        let got = child(&none, Some(&owner_only), true).unwrap();
        assert_eq!((got.control, got.dacl), (0, None));
        // A NULL DACL is the creator's to give.
        let null = Descriptor {
            control: SE_DACL_PRESENT,
            ..Descriptor::default()
        };
        let got = child(&p, Some(&null), false).unwrap();
        assert_eq!((got.control, &got.dacl), (SE_DACL_PRESENT, &None));
        let bytes = got.encode(ALL_PARTS);
        assert_eq!(
            &bytes[2..4],
            &(SE_SELF_RELATIVE | SE_DACL_PRESENT).to_le_bytes()
        );
        assert_eq!(&bytes[16..20], &[0; 4], "no ACL behind a NULL DACL");
    }

    #[test]
    fn an_inherited_acl_too_large_to_describe_is_refused() {
        // 2,000 ACEs of 20 bytes fit one ACL; split in two on a
        // subdirectory they do not.
        let aces: Vec<(&[u8], u32, u8)> = (0..2000)
            .map(|_| (sids::CREATOR_OWNER, GENERIC_ALL, CONTAINER_INHERIT_ACE))
            .collect();
        let p = parent(&aces, false);
        assert!(child(&p, None, false).is_none());
        assert_eq!(
            Descriptor::for_new_object(Some(&p), None, true, &user(), &user()),
            Err(DescriptorError::BadInheritance)
        );
        assert_eq!(DescriptorError::BadInheritance.ntstatus(), 0xC000_007D);
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
