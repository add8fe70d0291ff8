//! Command handlers that act on opens: one file per concern.

pub mod change;
pub mod create;
pub mod data_fsctl;
pub mod dir;
pub mod file;
pub mod fsctl;
pub mod info;
pub mod ioctl;
pub mod look;
pub mod quota;

use copyless_fscc::FileInfo;
use copyless_proto::messages::{FileId, FileTimes};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;
use copyless_vfs::{FileStat, VfsError};

use crate::conn::connection::{Begun, Chain, Compound, Connection, Req};
use crate::env::Env;
use crate::intent::Completion;
use crate::open::Open;

/// Where a request goes on once the filesystem call it waits for is
/// made (see `conn::waiting`).
pub(crate) enum Then {
    /// CLOSE: the closed open's file is to be removed.
    Close(Box<file::Removing>),
    /// CREATE (`msg`): it runs again with the open made (see
    /// `create::opens_by_call`); what it did before the open changed
    /// nothing, and is checked again against what may have changed.
    /// `retrying` when the run that made the call ran again after
    /// waiting for breaks (waiting.rs), which this run does too.
    Create { msg: Vec<u8>, retrying: bool },
    /// SET_INFO: the open's file is to be renamed.
    Rename(Box<info::Renaming>),
    /// CREATE (`msg`): what it opened is emptied (see
    /// [`create::Overwrite`]); the rest of the request follows.
    Overwrite {
        msg: Vec<u8>,
        finishing: Box<create::Finishing>,
    },
    /// SET_INFO (`msg`): it runs again with the change's result.
    Set { msg: Vec<u8> },
    /// QUERY_INFO (`msg`): it runs again with what was looked up.
    Query { msg: Vec<u8> },
    /// CLOSE (`msg`) asking for the file's attributes back: it runs again
    /// with them looked up.
    CloseLooked { msg: Vec<u8> },
    /// QUERY_DIRECTORY: its step (a [`dir::DirStep`]) is made.
    List(Box<dir::Querying>),
    /// CHANGE_NOTIFY (`msg`): the folder its open watches is watched by
    /// the engine too; it runs again, on the watch now set up.
    Notify { msg: Vec<u8> },
    /// A request whose reply, made (its `body`), waits for the call: a
    /// CREATE's that leased a folder first watched now.
    Reply { body: Vec<u8> },
    /// IOCTL: the file-system control `ctl_code` on the open `file_id`
    /// is made; its output is the reply's.
    Ioctl {
        ctl_code: u32,
        file_id: copyless_proto::messages::FileId,
    },
}

impl Then {
    /// The request, for one that runs again.
    pub(crate) fn request(&self) -> Option<&[u8]> {
        match self {
            Then::Create { msg, .. }
            | Then::Query { msg }
            | Then::CloseLooked { msg }
            | Then::Set { msg }
            | Then::Notify { msg } => Some(msg),
            Then::Close(_)
            | Then::Rename(_)
            | Then::List(_)
            | Then::Overwrite { .. }
            | Then::Reply { .. }
            | Then::Ioctl { .. } => None,
        }
    }
}

/// The NTSTATUS Windows gives for a filesystem error.
pub fn vfs_status(e: &VfsError) -> NtStatus {
    match e {
        VfsError::NameNotFound => status::OBJECT_NAME_NOT_FOUND,
        VfsError::PathNotFound => status::OBJECT_PATH_NOT_FOUND,
        VfsError::Collision => status::OBJECT_NAME_COLLISION,
        VfsError::NotADirectory => status::NOT_A_DIRECTORY,
        VfsError::IsADirectory => status::FILE_IS_A_DIRECTORY,
        VfsError::NotEmpty => status::DIRECTORY_NOT_EMPTY,
        VfsError::AccessDenied => status::ACCESS_DENIED,
        VfsError::InvalidName => status::OBJECT_NAME_INVALID,
        VfsError::DiskFull => status::DISK_FULL,
        VfsError::NotSupported => status::NOT_SUPPORTED,
        VfsError::Cancelled => status::CANCELLED,
        VfsError::Io(_) => status::UNSUCCESSFUL,
    }
}

/// Windows reports no size for directories.
pub fn file_times(st: &FileStat) -> FileTimes {
    FileTimes {
        creation_time: st.creation_time,
        last_access_time: st.last_access_time,
        last_write_time: st.last_write_time,
        change_time: st.change_time,
        allocation_size: if st.is_dir { 0 } else { st.alloc_size },
        end_of_file: if st.is_dir { 0 } else { st.size },
        attributes: st.attributes,
    }
}

pub fn file_info(st: &FileStat, delete_pending: bool) -> FileInfo {
    FileInfo {
        creation_time: st.creation_time,
        last_access_time: st.last_access_time,
        last_write_time: st.last_write_time,
        change_time: st.change_time,
        end_of_file: if st.is_dir { 0 } else { st.size },
        allocation_size: if st.is_dir { 0 } else { st.alloc_size },
        attributes: st.attributes,
        file_id: st.ino,
        // A link marked for deletion no longer counts (MS-FSA 2.1.5.12.27;
        // smb2.setinfo).
        nlink: if delete_pending {
            st.nlink.saturating_sub(1)
        } else {
            st.nlink
        },
        delete_pending,
        is_dir: st.is_dir,
        ea_size: st.ea_size,
    }
}

impl Connection {
    /// Goes on with the request `begun` (of `chain`) now that its call
    /// is made: writes its reply's body to `w`, or asks for another call
    /// (`begun.reply.wait`).
    pub(crate) fn resume(
        &mut self,
        then: Then,
        done: Completion,
        begun: &mut Begun,
        chain: &mut Chain,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        match (then, done) {
            (Then::Close(r), Completion::Unlinked(result)) => Ok(self.removed(r, result, w)),
            (Then::Rename(r), Completion::Renamed(result)) => self.renamed(*r, result, w),
            (Then::Query { msg }, Completion::Looked(looked)) => {
                let req = Req::kept(&msg, begun, chain);
                let (compound, reply) = (&mut chain.compound, &mut begun.reply);
                self.query_info(&req, compound, reply, w, Some(looked))
            }
            (Then::CloseLooked { msg }, Completion::Looked(looked)) => {
                let req = Req::kept(&msg, begun, chain);
                let (compound, reply) = (&mut chain.compound, &mut begun.reply);
                self.close(&req, compound, reply, w, Some(looked))
            }
            (Then::Overwrite { msg, finishing }, Completion::Overwritten(done)) => {
                let req = Req::kept(&msg, begun, chain);
                let (compound, reply) = (&mut chain.compound, &mut begun.reply);
                self.overwritten(&req, compound, reply, w, *finishing, *done)
            }
            (Then::Reply { body }, Completion::Watched) => {
                w.bytes(&body);
                Ok(status::SUCCESS)
            }
            (Then::Set { msg }, Completion::Changed(made)) => {
                let req = Req::kept(&msg, begun, chain);
                let (compound, reply) = (&mut chain.compound, &mut begun.reply);
                self.set_info(&req, compound, reply, w, Some(made))
            }
            (Then::List(q), Completion::Listed(step)) => self.listed(*q, *step, begun, chain, w),
            (Then::Ioctl { ctl_code, file_id }, Completion::Fsctl(done)) => {
                let (status, output) = done?;
                copyless_proto::messages::write_ioctl_response(w, ctl_code, file_id, &output);
                Ok(status)
            }
            (Then::Notify { msg }, Completion::Watched) => {
                let req = Req::kept(&msg, begun, chain);
                let (compound, reply) = (&mut chain.compound, &mut begun.reply);
                self.change_notify(&req, compound, reply, w)
            }
            (Then::Create { msg, retrying }, Completion::Made(made)) => {
                let req = Req::kept(&msg, begun, chain);
                let (compound, reply) = (&mut chain.compound, &mut begun.reply);
                self.retrying = retrying;
                let result = self.create(&req, compound, reply, w, env, Some(*made));
                self.retrying = false;
                result
            }
            // A completion of another kind than its call: an engine bug;
            // the request cannot go on.
            _ => {
                begun.reply.disconnect = true;
                Err(status::INTERNAL_ERROR)
            }
        }
    }

    /// What a request whose call never completes leaves behind is put
    /// right (see `Connection::settle_waiting`).
    pub(crate) fn abandon(&mut self, then: Then) {
        match then {
            Then::Close(r) => self.released(r.closing, None),
            Then::Overwrite { finishing, .. } => self.abandon_overwrite(*finishing),
            // Nothing of it is registered before the open is made; the
            // table follows a rename only once it is made; an enumeration
            // that does not come back ends with its connection.
            Then::Create { .. }
            | Then::Query { .. }
            | Then::CloseLooked { .. }
            | Then::Set { .. }
            | Then::Rename(_)
            | Then::List(_)
            | Then::Notify { .. }
            | Then::Reply { .. }
            | Then::Ioctl { .. } => {}
        }
    }

    /// The open a request names, checked against its session and tree.
    pub(crate) fn open_mut(
        &mut self,
        req: &Req<'_>,
        compound: &Compound,
        id: FileId,
    ) -> Result<&mut Open, NtStatus> {
        let id = self.file_id(id, compound)?;
        let session = self
            .sessions
            .get_mut(&req.session_id)
            .ok_or(status::USER_SESSION_DELETED)?;
        match session.opens.get_mut(&id.volatile) {
            Some(o) if o.file_id == id && o.tree_id == req.tree_id => Ok(o),
            _ => Err(status::FILE_CLOSED),
        }
    }
}
