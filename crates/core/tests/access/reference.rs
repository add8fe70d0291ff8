//! A second, plain statement of who may do what to a file of a share,
//! to test the server's one decision (`copyless_core::rights`) and every
//! path through it against: each rule written out as it reads in MS-DTYP
//! 2.5.3.2 (access check), MS-FSA 2.1.5.1.2.1 (open of an existing file),
//! MS-SMB2 3.3.5.9 and Linux's permission checks on mode bits, with no
//! laziness and no code shared with the server. Its constants are its
//! own, so that a wrong one in the server shows.

pub const READ_DATA: u32 = 0x1;
pub const WRITE_DATA: u32 = 0x2;
pub const APPEND_DATA: u32 = 0x4;
pub const READ_EA: u32 = 0x8;
pub const WRITE_EA: u32 = 0x10;
pub const EXECUTE: u32 = 0x20;
pub const DELETE_CHILD: u32 = 0x40;
pub const READ_ATTRIBUTES: u32 = 0x80;
pub const WRITE_ATTRIBUTES: u32 = 0x100;
pub const DELETE: u32 = 0x1_0000;
pub const READ_CONTROL: u32 = 0x2_0000;
pub const WRITE_DAC: u32 = 0x4_0000;
pub const WRITE_OWNER: u32 = 0x8_0000;
pub const SYNCHRONIZE: u32 = 0x10_0000;
pub const MAXIMUM_ALLOWED: u32 = 0x200_0000;
pub const GENERIC_ALL: u32 = 0x1000_0000;
pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
pub const GENERIC_WRITE: u32 = 0x4000_0000;
pub const GENERIC_READ: u32 = 0x8000_0000;

/// MS-DTYP 2.4.3 / MS-SMB2 2.2.13.1.1.
pub const ALL: u32 = 0x1F_01FF;
pub const GENERIC_READ_RIGHTS: u32 =
    READ_CONTROL | READ_DATA | READ_ATTRIBUTES | READ_EA | SYNCHRONIZE;
pub const GENERIC_WRITE_RIGHTS: u32 =
    READ_CONTROL | WRITE_DATA | WRITE_ATTRIBUTES | WRITE_EA | APPEND_DATA | SYNCHRONIZE;
pub const GENERIC_EXECUTE_RIGHTS: u32 = READ_CONTROL | READ_ATTRIBUTES | EXECUTE | SYNCHRONIZE;

pub const SUPERSEDE: u32 = 0;
pub const OPEN: u32 = 1;
pub const CREATE: u32 = 2;
pub const OPEN_IF: u32 = 3;
pub const OVERWRITE: u32 = 4;
pub const OVERWRITE_IF: u32 = 5;

pub const SHARE_READ: u32 = 1;
pub const SHARE_WRITE: u32 = 2;
pub const SHARE_DELETE: u32 = 4;

pub const ACCESS_DENIED: u32 = 0xC000_0022;
pub const SHARING_VIOLATION: u32 = 0xC000_0043;
pub const INVALID_OWNER: u32 = 0xC000_005A;
pub const OBJECT_NAME_NOT_FOUND: u32 = 0xC000_0034;
pub const OBJECT_NAME_COLLISION: u32 = 0xC000_0035;

/// A trustee, as the generator names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sid {
    User(u32),
    Group(u32),
    Everyone,
    AuthenticatedUsers,
    /// S-1-3-4: stands for whoever owns the object.
    OwnerRights,
}

#[derive(Debug, Clone)]
pub struct Ace {
    pub allow: bool,
    /// Inherit-only: applies to children, not to this object.
    pub inherit_only: bool,
    pub sid: Sid,
    pub mask: u32,
}

/// The DACL part of a stored descriptor.
#[derive(Debug, Clone)]
pub enum Dacl {
    /// Never set (only the owner was): the mode bits decide.
    Open,
    /// A NULL DACL: everyone may do everything.
    Null,
    Aces(Vec<Ace>),
}

/// A stored security descriptor.
#[derive(Debug, Clone)]
pub struct Sd {
    /// None: the object's Unix owner.
    pub owner: Option<Sid>,
    pub dacl: Dacl,
}

/// Who asks: a Unix account and its groups (the primary one among them).
#[derive(Debug, Clone)]
pub struct Person {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Person {
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// Whether the SID is in this person's token.
    pub fn holds(&self, sid: Sid) -> bool {
        match sid {
            Sid::User(uid) => uid == self.uid,
            Sid::Group(gid) => self.in_group(gid),
            Sid::Everyone | Sid::AuthenticatedUsers => true,
            Sid::OwnerRights => false,
        }
    }
}

/// A file or folder on disk.
#[derive(Debug, Clone)]
pub struct Node {
    pub uid: u32,
    pub gid: u32,
    /// Permission bits (sticky included).
    pub mode: u32,
    pub sd: Option<Sd>,
    /// FILE_ATTRIBUTE_READONLY.
    pub read_only: bool,
}

fn map_generic(mask: u32) -> u32 {
    let mut m = mask & !(GENERIC_ALL | GENERIC_EXECUTE | GENERIC_WRITE | GENERIC_READ);
    if mask & GENERIC_READ != 0 {
        m |= GENERIC_READ_RIGHTS;
    }
    if mask & GENERIC_WRITE != 0 {
        m |= GENERIC_WRITE_RIGHTS;
    }
    if mask & GENERIC_EXECUTE != 0 {
        m |= GENERIC_EXECUTE_RIGHTS;
    }
    if mask & GENERIC_ALL != 0 {
        m |= ALL;
    }
    m
}

/// MS-DTYP 2.5.3.2, one right at a time: the owner's implicit
/// READ_CONTROL and WRITE_DAC (unless an OWNER RIGHTS ACE is there), else
/// the first ACE that applies to the caller and names the right decides.
pub fn dacl_grants(sd: &Sd, unix_owner: u32, who: &Person) -> u32 {
    let dacl = match &sd.dacl {
        Dacl::Aces(aces) => aces,
        Dacl::Null => return ALL,
        Dacl::Open => unreachable!("a descriptor that leaves its DACL open is not evaluated"),
    };
    let owner = sd.owner.unwrap_or(Sid::User(unix_owner));
    let is_owner = who.holds(owner);
    let owner_rights_ace = dacl.iter().any(|a| a.sid == Sid::OwnerRights);
    let mut granted = 0;
    for bit in (0..32).map(|i| 1u32 << i).filter(|b| ALL & b != 0) {
        if is_owner && !owner_rights_ace && (READ_CONTROL | WRITE_DAC) & bit != 0 {
            granted |= bit;
            continue;
        }
        let first = dacl.iter().find(|a| {
            !a.inherit_only
                && map_generic(a.mask) & bit != 0
                && (who.holds(a.sid) || (a.sid == Sid::OwnerRights && is_owner))
        });
        if first.is_some_and(|a| a.allow) {
            granted |= bit;
        }
    }
    granted
}

/// The kernel's rwx for `who` on `node`, by its mode bits alone.
pub fn unix_bits(node: &Node, who: &Person) -> u32 {
    let class = if who.uid == node.uid {
        node.mode >> 6
    } else if who.in_group(node.gid) {
        node.mode >> 3
    } else {
        node.mode
    };
    class & 7
}

/// What the descriptor derived from the mode gives: r as FILE_GENERIC_READ
/// (and, on a file, FILE_GENERIC_EXECUTE: running it is reading it), w as
/// FILE_GENERIC_WRITE with DELETE_CHILD, a folder's x as
/// FILE_GENERIC_EXECUTE; READ_CONTROL, WRITE_DAC and WRITE_OWNER to the
/// owner only.
pub fn derived_grants(node: &Node, who: &Person, is_dir: bool) -> u32 {
    let bits = unix_bits(node, who);
    let (r, w, x) = (bits & 4 != 0, bits & 2 != 0, bits & 1 != 0);
    let mut granted = 0;
    if r {
        granted |= GENERIC_READ_RIGHTS;
    }
    if w {
        granted |= GENERIC_WRITE_RIGHTS | DELETE_CHILD;
    }
    if (is_dir && x) || (!is_dir && r) {
        granted |= GENERIC_EXECUTE_RIGHTS;
    }
    if who.uid == node.uid {
        granted |= READ_CONTROL | WRITE_DAC | WRITE_OWNER;
    }
    granted
}

/// What a descriptor that holds a DACL grants; None when there is none
/// stored, or it leaves its DACL open.
fn stored_grants(node: &Node, who: &Person) -> Option<u32> {
    node.sd
        .as_ref()
        .filter(|sd| !matches!(sd.dacl, Dacl::Open))
        .map(|sd| dacl_grants(sd, node.uid, who))
}

/// The object's own rights: its stored DACL's; or the mode's, with the
/// owner's implicit READ_CONTROL and WRITE_DAC to whoever holds an owner
/// stored without a DACL.
fn descriptor_grants(node: &Node, who: &Person, is_dir: bool) -> u32 {
    if let Some(granted) = stored_grants(node, who) {
        return granted;
    }
    let mut r = derived_grants(node, who, is_dir);
    if let Some(owner) = node.sd.as_ref().and_then(|sd| sd.owner) {
        if who.holds(owner) {
            r |= READ_CONTROL | WRITE_DAC;
        }
    }
    r
}

/// Linux's rule for unlinking an entry of `parent`: write and search
/// permission on it, and in a sticky folder, owning the entry or the
/// folder.
pub fn may_unlink(parent: &Node, entry: &Node, who: &Person) -> bool {
    let bits = unix_bits(parent, who);
    let sticky = parent.mode & 0o1000 != 0;
    bits & 3 == 3 && (!sticky || who.uid == entry.uid || who.uid == parent.uid)
}

/// What an opener asks for.
#[derive(Debug, Clone)]
pub struct Open {
    pub desired: u32,
    pub disposition: u32,
    pub share: u32,
    /// The client asked for its maximal access (MxAc).
    pub mxac: bool,
}

/// An existing file or folder, in a folder of the share, and what is
/// around it.
#[derive(Debug, Clone)]
pub struct Scene {
    pub who: Person,
    pub parent: Node,
    pub object: Node,
    pub is_dir: bool,
    /// Some(exists): the open names a stream of the object.
    pub stream: Option<bool>,
    pub read_only_share: bool,
    /// Another open of the same file or stream: (granted, share access).
    pub other: Option<(u32, u32)>,
}

/// What the server must answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    Refused(u32),
    Opened {
        granted: u32,
        /// Only when asked for.
        maximal: Option<u32>,
        /// The data was emptied (or the stream made).
        truncated: bool,
    },
}

fn conflict(a: u32, a_share: u32, b: u32, b_share: u32) -> bool {
    let checked = READ_DATA | EXECUTE | WRITE_DATA | APPEND_DATA | DELETE;
    if a & checked == 0 || b & checked == 0 {
        return false;
    }
    let reads = |x: u32| x & (READ_DATA | EXECUTE) != 0;
    let writes = |x: u32| x & (WRITE_DATA | APPEND_DATA) != 0;
    let deletes = |x: u32| x & DELETE != 0;
    (reads(a) && b_share & SHARE_READ == 0)
        || (writes(a) && b_share & SHARE_WRITE == 0)
        || (deletes(a) && b_share & SHARE_DELETE == 0)
        || (reads(b) && a_share & SHARE_READ == 0)
        || (writes(b) && a_share & SHARE_WRITE == 0)
        || (deletes(b) && a_share & SHARE_DELETE == 0)
}

/// A CREATE of the existing object of `scene` (or of its stream).
pub fn open(scene: &Scene, open: &Open) -> Expect {
    let who = &scene.who;
    let obj = &scene.object;
    let denied = Expect::Refused(ACCESS_DENIED);
    let explicit = map_generic(open.desired & !MAXIMUM_ALLOWED);
    let truncating = matches!(open.disposition, SUPERSEDE | OVERWRITE | OVERWRITE_IF);
    let new_stream = scene.stream == Some(false) && !matches!(open.disposition, OPEN | OVERWRITE);
    if open.desired == 0 {
        return denied;
    }
    // MS-SMB2 3.3.5.9: a read-only share takes no modifying open.
    let modifying = WRITE_DATA
        | APPEND_DATA
        | WRITE_EA
        | WRITE_ATTRIBUTES
        | DELETE_CHILD
        | DELETE
        | WRITE_DAC
        | WRITE_OWNER;
    if scene.read_only_share && (explicit & modifying != 0 || truncating) {
        return denied;
    }
    // Linux: reaching the object takes search permission on its folder;
    // the server opens a file to read it even when only its attributes are
    // asked for, and to write when its data is written or emptied.
    let bits = unix_bits(obj, who);
    let parent_bits = unix_bits(&scene.parent, who);
    if parent_bits & 1 == 0 {
        return denied;
    }
    let file = !scene.is_dir;
    if file && bits & 4 == 0 {
        return denied;
    }
    let data = WRITE_DATA | APPEND_DATA;
    if file && scene.stream.is_none() && (explicit & data != 0 || truncating) && bits & 2 == 0 {
        return denied;
    }
    if scene.stream.is_none() && open.disposition == CREATE {
        return Expect::Refused(OBJECT_NAME_COLLISION);
    }
    let (granted, rights) = match decide(scene, open) {
        Ok(decided) => decided,
        Err(status) => return Expect::Refused(status),
    };
    // A stream is looked for once its file may be used so.
    match (scene.stream, open.disposition) {
        (Some(true), CREATE) => return Expect::Refused(OBJECT_NAME_COLLISION),
        (Some(false), OPEN | OVERWRITE) => return Expect::Refused(OBJECT_NAME_NOT_FOUND),
        _ => {}
    }
    // MS-FSA 2.1.5.1.2.2: sharing, an emptied file counting as written.
    if let Some((other, other_share)) = scene.other {
        let as_writer = if truncating {
            granted | WRITE_DATA
        } else {
            granted
        };
        if conflict(as_writer, open.share, other, other_share) {
            return Expect::Refused(SHARING_VIOLATION);
        }
    }
    Expect::Opened {
        granted,
        maximal: open.mxac.then_some(rights),
        truncated: truncating || new_stream,
    }
}

/// The access decision alone (after the kernel let the object be
/// opened): the rights granted, and all the caller holds; or the status.
pub fn decide(scene: &Scene, open: &Open) -> Result<(u32, u32), u32> {
    let who = &scene.who;
    let obj = &scene.object;
    let explicit = map_generic(open.desired & !MAXIMUM_ALLOWED);
    let maximum = open.desired & MAXIMUM_ALLOWED != 0;
    let truncating = matches!(open.disposition, SUPERSEDE | OVERWRITE | OVERWRITE_IF);
    let new_stream = scene.stream == Some(false) && !matches!(open.disposition, OPEN | OVERWRITE);
    let file = !scene.is_dir;
    let data = WRITE_DATA | APPEND_DATA;
    let bits = unix_bits(obj, who);
    // What the operation itself needs (MS-FSA 2.1.5.1.2.1; a new stream is
    // written into its object).
    let mut implied = 0;
    if truncating {
        implied |= WRITE_DATA | WRITE_EA | WRITE_ATTRIBUTES;
    }
    if open.disposition == SUPERSEDE {
        implied |= DELETE;
    }
    if new_stream {
        implied |= if scene.is_dir {
            APPEND_DATA
        } else {
            WRITE_DATA
        };
    }
    let need = explicit | implied;
    // MS-FSA: a read-only file is not written.
    let writes_data = scene.stream.is_some() || file;
    if file && obj.read_only && need & data != 0 {
        return Err(ACCESS_DENIED);
    }
    // The object's descriptor, then what its folder adds.
    let mut rights = descriptor_grants(obj, who, scene.is_dir);
    let folder = stored_grants(&scene.parent, who).unwrap_or(READ_DATA | DELETE_CHILD);
    if folder & DELETE_CHILD != 0 {
        rights |= DELETE;
    }
    if folder & READ_DATA != 0 {
        rights |= READ_ATTRIBUTES;
    }
    // The kernel: unlinking by its rule, data written only with write
    // permission (streams live in the object's xattrs), never a
    // read-only file's.
    if !may_unlink(&scene.parent, obj, who) {
        rights &= !DELETE;
    }
    if writes_data && (bits & 2 == 0 || (file && obj.read_only)) {
        rights &= !data;
    }
    if scene.read_only_share {
        rights &= GENERIC_READ_RIGHTS | GENERIC_EXECUTE_RIGHTS;
    }
    if need & !rights != 0 {
        return Err(ACCESS_DENIED);
    }
    let granted = if maximum { explicit | rights } else { explicit };
    Ok((granted, rights))
}

/// A rename by `who`, whose open holds DELETE, of a file into `folder`,
/// replacing `target` when it is given (ReplaceIfExists). Ok or the
/// status.
pub fn rename(
    who: &Person,
    from_folder: &Node,
    folder: &Node,
    target: Option<&Node>,
) -> Result<(), u32> {
    // Linux: write and search on both folders, the sticky rule on each.
    let source = Node {
        uid: who.uid,
        gid: who.gid,
        mode: 0o644,
        sd: None,
        read_only: false,
    };
    // The open of the file for DELETE: its folder's DELETE_CHILD (its
    // own descriptor is derived and gives none) and the kernel's rule.
    let from_rights = stored_grants(from_folder, who);
    if from_rights.is_some_and(|r| r & DELETE_CHILD == 0) || !may_unlink(from_folder, &source, who)
    {
        return Err(ACCESS_DENIED);
    }
    if unix_bits(folder, who) & 3 != 3 {
        return Err(ACCESS_DENIED);
    }
    // MS-FSA: the new folder must let the caller add a file.
    let rights = stored_grants(folder, who);
    if rights.is_some_and(|r| r & WRITE_DATA == 0) {
        return Err(ACCESS_DENIED);
    }
    if let Some(target) = target {
        // Replacing deletes the target: the folder's DELETE_CHILD, or
        // DELETE from the target's own stored descriptor (a derived one
        // leaves deleting to the folder), and the kernel's rule.
        let by_folder = rights.is_none_or(|r| r & DELETE_CHILD != 0);
        let own = if unix_bits(target, who) & 4 != 0 {
            stored_grants(target, who).unwrap_or(0)
        } else {
            0
        };
        if !(by_folder || own & DELETE != 0) || !may_unlink(folder, target, who) {
            return Err(ACCESS_DENIED);
        }
    }
    Ok(())
}

/// SET_INFO of an object's owner to `new_owner` by `who`, on an open
/// that asked for WRITE_OWNER: Ok, or the status of the CREATE or of the
/// SET_INFO.
pub fn set_owner(who: &Person, parent: &Node, object: &Node, new_owner: Sid) -> Result<(), u32> {
    let scene = Scene {
        who: who.clone(),
        parent: parent.clone(),
        object: object.clone(),
        is_dir: false,
        stream: None,
        read_only_share: false,
        other: None,
    };
    let ask = Open {
        desired: WRITE_OWNER,
        disposition: OPEN,
        share: 7,
        mxac: false,
    };
    if let Expect::Refused(status) = open(&scene, &ask) {
        return Err(status);
    }
    let present = object
        .sd
        .as_ref()
        .and_then(|sd| sd.owner)
        .unwrap_or(Sid::User(object.uid));
    let own = who.holds(new_owner);
    if new_owner != present && !own {
        return Err(INVALID_OWNER);
    }
    // Linux: the descriptor goes into a user xattr, which takes write
    // permission on the object.
    if unix_bits(object, who) & 2 == 0 {
        return Err(ACCESS_DENIED);
    }
    Ok(())
}
