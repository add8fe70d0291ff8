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
use copyless_vfs::{FileStat, Identity, Opened, Vfs, VfsError};

use crate::access::{self, DELETE, FILE_DELETE_CHILD, FILE_READ_ATTRIBUTES, MAXIMUM_ALLOWED};
use crate::handlers::vfs_status;
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

fn dir_stored(vfs: &dyn Vfs, who: &Identity, path: &str) -> Result<Option<Descriptor>, NtStatus> {
    match vfs.dir_security(who, path) {
        Ok(raw) => Ok(raw.as_deref().map(parse_stored)),
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
    Some(path.rsplit_once('/').map_or("", |(p, _)| p))
}

/// Rights on an existing object: the access asked for (`desired`, as the
/// client sent it) checked against its stored descriptor. Returns
/// (granted, maximal) or ACCESS_DENIED; objects without a descriptor get
/// `granted` and `maximal` back unchanged.
///
/// As on Windows, DELETE is also granted when the parent directory grants
/// FILE_DELETE_CHILD, and FILE_READ_ATTRIBUTES when it grants
/// FILE_LIST_DIRECTORY.
pub fn check_open(
    vfs: &dyn Vfs,
    opened: &Opened,
    caller: &Caller<'_>,
    desired: u32,
    granted: u32,
    maximal: u32,
) -> Result<(u32, u32), NtStatus> {
    let Some(mut sd) = stored(vfs, &opened.handle)? else {
        return Ok((granted, maximal));
    };
    // The owner's implicit rights belong to the file's owner when the
    // descriptor names none.
    if sd.owner.is_none() {
        sd.owner = Some(sids::unix_user(opened.stat.uid));
    }
    let path = opened.path.as_str();
    let token = &caller.token();
    let mut allowed = sd.granted(token);
    if allowed & (DELETE | FILE_READ_ATTRIBUTES) != DELETE | FILE_READ_ATTRIBUTES {
        let parent_rights = match parent(path) {
            Some(p) => match dir_stored(vfs, caller.who, p)? {
                Some(psd) => psd.granted(token),
                None => access::FILE_ALL_ACCESS,
            },
            None => 0,
        };
        if parent_rights & FILE_DELETE_CHILD != 0 {
            allowed |= DELETE;
        }
        if parent_rights & access::FILE_READ_DATA != 0 {
            allowed |= FILE_READ_ATTRIBUTES;
        }
    }
    let explicit = access::map_generic(desired & !MAXIMUM_ALLOWED, 0);
    // System security is a privilege, not something a DACL grants.
    if explicit & !allowed & !access::ACCESS_SYSTEM_SECURITY != 0 {
        return Err(status::ACCESS_DENIED);
    }
    let maximal = allowed & maximal;
    let granted = if desired & MAXIMUM_ALLOWED != 0 {
        explicit | maximal
    } else {
        explicit
    };
    Ok((granted, maximal))
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
    let Some(psd) = dir_stored(vfs, caller.who, p)? else {
        return Ok(None);
    };
    // FILE_ADD_FILE and FILE_ADD_SUBDIRECTORY share their bits with
    // FILE_WRITE_DATA and FILE_APPEND_DATA.
    let need = if is_dir {
        access::FILE_APPEND_DATA
    } else {
        access::FILE_WRITE_DATA
    };
    if psd.granted(&caller.token()) & need == 0 {
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
