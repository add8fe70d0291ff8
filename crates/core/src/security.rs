//! NT access control on top of the share's files: who a session is (its
//! token of SIDs), and what a stored security descriptor lets it do.
//!
//! A session acts on disk as its user's Unix account (or as the server,
//! when it cannot change identity), so a token holds that uid and its
//! groups as Samba's Unix SIDs, plus Everyone and Authenticated Users
//! (Anonymous for a null session).
//! Objects without a stored descriptor keep their rights from the mode
//! bits, enforced by the file system; only a descriptor a client stored
//! (or one a new object inherited) is evaluated here. A stored descriptor
//! may leave parts open: a missing owner, group or DACL shows what the
//! mode gives, and a missing DACL grants what the mode grants.

use copyless_fscc::descriptor::{sids, Descriptor};
use copyless_proto::status::{self, NtStatus};
use copyless_vfs::{FileStat, Identity, Opened, UnixAccess, Vfs, VfsError};

use crate::access;
use crate::handlers::vfs_status;
use crate::rights;
use crate::server::ServerConfig;

pub type Token = Vec<Vec<u8>>;

/// The session asking; its token is built only when a stored descriptor
/// has to be evaluated.
pub struct Caller<'a> {
    pub config: &'a ServerConfig,
    pub anonymous: bool,
    /// Who the session's file work is done as.
    pub who: &'a Identity,
}

impl Caller<'_> {
    /// The SIDs of the identity the session acts as: a user's own SID
    /// under the machine SID, then Samba's Unix SIDs (S-1-22-1-uid and
    /// S-1-22-2-gid, for the primary group and every other), Everyone, and
    /// Authenticated Users or Anonymous.
    pub fn token(&self) -> Token {
        let mut token = match self.who {
            Identity::Server => vec![
                sids::unix_user(self.config.unix_uid),
                sids::unix_group(self.config.unix_gid),
            ],
            Identity::Unix(ids) => {
                let mut t = vec![
                    sids::machine_account(self.config.machine_sid, user_rid(ids.uid)),
                    sids::unix_user(ids.uid),
                    sids::unix_group(ids.gid),
                ];
                t.extend(
                    ids.groups
                        .iter()
                        .filter(|&&g| g != ids.gid)
                        .map(|&g| sids::unix_group(g)),
                );
                t
            }
        };
        token.push(sids::EVERYONE.to_vec());
        token.push(if self.anonymous {
            sids::ANONYMOUS.to_vec()
        } else {
            sids::AUTHENTICATED_USERS.to_vec()
        });
        token
    }

    /// Whether the caller owns an object with `st`: its Unix owner, or
    /// the server itself when it runs as root.
    pub fn owns(&self, st: &FileStat) -> bool {
        match self.who {
            Identity::Server => self.config.unix_uid == 0 || st.uid == self.config.unix_uid,
            Identity::Unix(ids) => st.uid == ids.uid,
        }
    }
}

/// The session a call acts for, owned to travel with it to the engine
/// (a [`Caller`] borrows the server's configuration).
pub struct OwnedCaller {
    server: std::sync::Arc<crate::server::Server>,
    anonymous: bool,
}

/// The server's tables are not shown.
impl std::fmt::Debug for OwnedCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedCaller")
            .field("anonymous", &self.anonymous)
            .finish()
    }
}

impl OwnedCaller {
    pub fn new(server: &std::sync::Arc<crate::server::Server>, caller: &Caller<'_>) -> Self {
        OwnedCaller::from_session(server, caller.anonymous)
    }

    /// The caller a session acts for, anonymous or not.
    pub fn from_session(server: &std::sync::Arc<crate::server::Server>, anonymous: bool) -> Self {
        OwnedCaller {
            server: server.clone(),
            anonymous,
        }
    }

    /// The caller, acting as `who`.
    pub fn caller<'a>(&'a self, who: &'a Identity) -> Caller<'a> {
        Caller {
            config: &self.server.config,
            anonymous: self.anonymous,
            who,
        }
    }

    pub fn server(&self) -> &crate::server::Server {
        &self.server
    }
}

/// A user's RID under the machine SID, from its uid as Samba's algorithmic
/// mapping makes it: stable without a table, and never a well-known RID.
pub fn user_rid(uid: u32) -> u32 {
    uid.saturating_mul(2).saturating_add(1000)
}

/// The stored descriptor of an object, parsed. A stored value that does
/// not parse is treated as a DACL granting nothing, so damage never opens
/// a file up; its owner can still replace it (READ_CONTROL, WRITE_DAC).
pub fn stored(vfs: &dyn Vfs, h: &copyless_vfs::FileHandle) -> Result<Option<Descriptor>, NtStatus> {
    let raw = vfs.security(h).map_err(|e| vfs_status(&e))?;
    Ok(raw.as_deref().map(parse_stored))
}

/// The stored descriptor of the folder at `path`, and the uid owning the
/// folder.
fn dir_stored(
    vfs: &dyn Vfs,
    who: &Identity,
    path: &str,
) -> Result<Option<(Descriptor, u32)>, NtStatus> {
    match vfs.dir_security(who, path) {
        // One that leaves its DACL open leaves the folder to the kernel.
        Ok(raw) => Ok(raw
            .map(|(raw, owner)| (parse_stored(&raw), owner))
            .filter(|(sd, _)| rights::decides(sd))),
        // The open itself reports a missing directory.
        Err(VfsError::NameNotFound | VfsError::PathNotFound | VfsError::NotADirectory) => Ok(None),
        Err(e) => Err(vfs_status(&e)),
    }
}

fn parse_stored(raw: &[u8]) -> Descriptor {
    Descriptor::parse(raw).unwrap_or_else(|_| Descriptor {
        control: 0x0004,
        dacl: Some(Vec::new()),
        ..Descriptor::default()
    })
}

fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    Some(crate::names::path::parent(path))
}

/// The facts of an open object, gathered as a decision asks for them
/// (see [`rights`]).
pub struct OpenedFacts<'a> {
    vfs: &'a dyn Vfs,
    caller: &'a Caller<'a>,
    opened: &'a Opened,
    token: Option<Token>,
    /// The kernel's own answer, once asked.
    kernel: Option<UnixAccess>,
}

impl<'a> OpenedFacts<'a> {
    pub fn new(vfs: &'a dyn Vfs, caller: &'a Caller<'a>, opened: &'a Opened) -> Self {
        OpenedFacts {
            vfs,
            caller,
            opened,
            token: None,
            kernel: None,
        }
    }

    fn token(&mut self) -> &Token {
        self.token.get_or_insert_with(|| self.caller.token())
    }

    /// What the kernel lets the caller do: the mode bits answer where they
    /// grant all that matters for `wanted`; where they refuse, the kernel
    /// is asked, since a POSIX ACL may grant what the mode does not. (An
    /// ACL that refuses what the mode grants is met when the kernel checks
    /// the operation itself.)
    fn unix(&mut self, wanted: u32) -> Result<UnixAccess, NtStatus> {
        if let Some(k) = self.kernel {
            return Ok(k);
        }
        let st = &self.opened.stat;
        let owner = self.caller.owns(st);
        let mode = UnixAccess::from_mode(st.mode, st.uid, st.gid, self.caller.who);
        let every = UnixAccess {
            read: true,
            write: true,
            execute: true,
        };
        let matters = |u| rights::derived(u, owner, st.is_dir) & wanted;
        if matters(mode) == matters(every) {
            return Ok(mode);
        }
        let k = self
            .vfs
            .unix_access(&self.opened.handle)
            .map_err(|e| vfs_status(&e))?;
        self.kernel = Some(k);
        Ok(k)
    }
}

impl rights::Facts for OpenedFacts<'_> {
    fn own(&mut self, wanted: u32) -> Result<u32, NtStatus> {
        let st = &self.opened.stat;
        let sd = stored(self.vfs, &self.opened.handle)?;
        if let Some(sd) = sd.as_ref().filter(|sd| rights::decides(sd)) {
            let owner = sids::unix_user(st.uid);
            return Ok(rights::stored_rights(sd, &owner, self.token()));
        }
        let (owner, is_dir) = (self.caller.owns(st), st.is_dir);
        let mut own = rights::derived(self.unix(wanted)?, owner, is_dir);
        if let Some(sd) = &sd {
            own |= rights::stored_owner_rights(sd, self.token());
        }
        Ok(own)
    }

    fn parent(&mut self) -> Result<Option<u32>, NtStatus> {
        let Some(p) = parent(&self.opened.path) else {
            return Ok(None);
        };
        let Some((sd, owner)) = dir_stored(self.vfs, self.caller.who, p)? else {
            return Ok(None);
        };
        let owner = sids::unix_user(owner);
        Ok(Some(rights::stored_rights(&sd, &owner, self.token())))
    }

    fn may_unlink(&mut self) -> Result<bool, NtStatus> {
        if let Some(may) = self.opened.may_unlink {
            return Ok(may);
        }
        Ok(self
            .vfs
            .may_delete(self.caller.who, &self.opened.path)
            .is_ok())
    }

    fn may_write(&mut self) -> Result<bool, NtStatus> {
        Ok(self.unix(access::FILE_WRITE_DATA)?.write)
    }
}

/// What the stored descriptor of the folder at the real path `path`
/// grants the caller; None when it has none.
pub fn folder_rights(
    vfs: &dyn Vfs,
    caller: &Caller<'_>,
    path: &str,
) -> Result<Option<u32>, NtStatus> {
    folder_rights_for(vfs, caller.who, &caller.token(), path)
}

/// What the stored descriptor of the folder at `path`, reached as `who`,
/// grants `token`; None when it has none (or leaves its DACL open).
pub fn folder_rights_for(
    vfs: &dyn Vfs,
    who: &Identity,
    token: &[Vec<u8>],
    path: &str,
) -> Result<Option<u32>, NtStatus> {
    Ok(dir_stored(vfs, who, path)?
        .map(|(sd, owner)| rights::stored_rights(&sd, &sids::unix_user(owner), token)))
}

/// What the stored descriptor of the object at `path` grants the caller
/// (0 when it has none: a derived descriptor leaves DELETE to the
/// parent, and so do objects the caller may not even open).
pub fn stored_rights_at(vfs: &dyn Vfs, caller: &Caller<'_>, path: &str) -> Result<u32, NtStatus> {
    let req = copyless_vfs::OpenRequest::look(caller.who, path, copyless_vfs::Kind::Any);
    let opened = match vfs.open(&req) {
        Ok(o) => o,
        Err(VfsError::AccessDenied) => return Ok(0),
        Err(e) => return Err(vfs_status(&e)),
    };
    Ok(match stored(vfs, &opened.handle)? {
        Some(sd) if rights::decides(&sd) => {
            rights::stored_rights(&sd, &sids::unix_user(opened.stat.uid), &caller.token())
        }
        _ => 0,
    })
}

/// Whether `caller` sees the entry `name` (at `path`) of the folder `dir`
/// in a listing that leaves out what its reader may not read
/// (access-based enumeration): its stored descriptor must grant what
/// reading it takes (FILE_READ_DATA, FILE_READ_EA, FILE_READ_ATTRIBUTES
/// and READ_CONTROL), the folder's FILE_LIST_DIRECTORY not standing in for
/// FILE_READ_ATTRIBUTES, as Windows checks; without one, the kernel's
/// read permission decides.
pub fn may_see(
    vfs: &dyn Vfs,
    caller: &Caller<'_>,
    dir: &copyless_vfs::FileHandle,
    name: &str,
    path: &str,
) -> bool {
    const READING: u32 = access::FILE_READ_DATA
        | access::FILE_READ_EA
        | access::FILE_READ_ATTRIBUTES
        | access::READ_CONTROL;
    let kernel = || vfs.may_read_entry(dir, name).unwrap_or(false);
    if !vfs.descriptors_stored() {
        return kernel();
    }
    let req = copyless_vfs::OpenRequest::look(caller.who, path, copyless_vfs::Kind::Any);
    let Ok(opened) = vfs.open(&req) else {
        return false;
    };
    match stored(vfs, &opened.handle) {
        Ok(Some(sd)) if rights::decides(&sd) => {
            let owner = sids::unix_user(opened.stat.uid);
            rights::stored_rights(&sd, &owner, &caller.token()) & READING == READING
        }
        Ok(_) => kernel(),
        Err(_) => false,
    }
}

/// What creating `path` needs from its parent's stored descriptor: the
/// right to add a file or subdirectory (ACCESS_DENIED otherwise), and the
/// descriptor the new object inherits, if any. None when the parent has
/// no descriptor.
pub fn check_create(
    vfs: &dyn Vfs,
    path: &str,
    is_dir: bool,
    caller: &Caller<'_>,
) -> Result<Option<Descriptor>, NtStatus> {
    let Some(p) = parent(path) else {
        return Ok(None);
    };
    let Some((psd, owner)) = dir_stored(vfs, caller.who, p)? else {
        return Ok(None);
    };
    let need = if is_dir {
        access::FILE_ADD_SUBDIRECTORY
    } else {
        access::FILE_ADD_FILE
    };
    if rights::stored_rights(&psd, &sids::unix_user(owner), &caller.token()) & need == 0 {
        return Err(status::ACCESS_DENIED);
    }
    Ok(Some(psd))
}

/// Stores on a new object the descriptor it is created with: what it
/// inherits from its parent directory's stored descriptor and what its
/// creator sent (the SecD create context), if anything (see
/// [`Descriptor::for_new_object`]).
pub fn assign(
    vfs: &dyn Vfs,
    h: &copyless_vfs::FileHandle,
    stat: &FileStat,
    parent: Option<&Descriptor>,
    creator: Option<&Descriptor>,
) -> Result<(), NtStatus> {
    let owner = sids::unix_user(stat.uid);
    let group = sids::unix_group(stat.gid);
    let sd = Descriptor::for_new_object(parent, creator, stat.is_dir, &owner, &group)
        .map_err(|e| e.ntstatus())?;
    if let Some(sd) = sd {
        vfs.set_security(h, &sd.encode(copyless_fscc::descriptor::ALL_PARTS))
            .map_err(|e| vfs_status(&e))?;
    }
    Ok(())
}

/// The descriptor an object shows: the stored one, with what it leaves
/// open (owner, group, DACL) derived from the object's owner and mode.
pub fn effective(
    vfs: &dyn Vfs,
    h: &copyless_vfs::FileHandle,
    st: &FileStat,
) -> Result<Descriptor, NtStatus> {
    let bytes = copyless_fscc::security_descriptor(
        st.uid,
        st.gid,
        st.mode,
        st.is_dir,
        copyless_fscc::descriptor::ALL_PARTS,
    );
    let derived = Descriptor::parse(&bytes).map_err(|_| status::INTERNAL_ERROR)?;
    Ok(match stored(vfs, h)? {
        Some(sd) => sd.or_defaults(derived),
        None => derived,
    })
}
