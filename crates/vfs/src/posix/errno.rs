//! errno to VfsError.

use rustix::io::Errno;

use crate::VfsError;

/// Maps an error from a path operation. `last` says whether the failing
/// lookup was of the final component (NameNotFound) or of a directory on
/// the way (PathNotFound).
pub fn path_err(e: Errno, last: bool) -> VfsError {
    match e {
        Errno::NOENT if last => VfsError::NameNotFound,
        Errno::NOENT | Errno::NOTDIR => VfsError::PathNotFound,
        Errno::EXIST => VfsError::Collision,
        // EXDEV and ELOOP are what openat2 says when RESOLVE_BENEATH or
        // RESOLVE_NO_MAGICLINKS refused a path that would leave the share.
        Errno::ACCESS | Errno::PERM | Errno::XDEV | Errno::LOOP | Errno::ROFS | Errno::TXTBSY => {
            VfsError::AccessDenied
        }
        Errno::NOSPC | Errno::DQUOT => VfsError::DiskFull,
        Errno::NAMETOOLONG | Errno::INVAL | Errno::ILSEQ => VfsError::InvalidName,
        Errno::ISDIR => VfsError::IsADirectory,
        Errno::NOTEMPTY => VfsError::NotEmpty,
        e => VfsError::Io(e.into()),
    }
}

/// Maps an error from an operation on an open handle.
pub fn io_err(e: Errno) -> VfsError {
    match e {
        Errno::ACCESS | Errno::PERM | Errno::ROFS | Errno::TXTBSY => VfsError::AccessDenied,
        Errno::NOSPC | Errno::DQUOT => VfsError::DiskFull,
        Errno::ISDIR => VfsError::IsADirectory,
        e => VfsError::Io(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_depends_on_position() {
        assert!(matches!(
            path_err(Errno::NOENT, true),
            VfsError::NameNotFound
        ));
        assert!(matches!(
            path_err(Errno::NOENT, false),
            VfsError::PathNotFound
        ));
        assert!(matches!(
            path_err(Errno::NOTDIR, true),
            VfsError::PathNotFound
        ));
    }

    #[test]
    fn escapes_are_access_denied() {
        assert!(matches!(
            path_err(Errno::XDEV, true),
            VfsError::AccessDenied
        ));
        assert!(matches!(
            path_err(Errno::LOOP, true),
            VfsError::AccessDenied
        ));
    }

    #[test]
    fn others() {
        assert!(matches!(path_err(Errno::EXIST, true), VfsError::Collision));
        assert!(matches!(path_err(Errno::DQUOT, true), VfsError::DiskFull));
        assert!(matches!(
            path_err(Errno::NAMETOOLONG, true),
            VfsError::InvalidName
        ));
        assert!(matches!(
            path_err(Errno::NOTEMPTY, true),
            VfsError::NotEmpty
        ));
        assert!(matches!(
            path_err(Errno::ISDIR, true),
            VfsError::IsADirectory
        ));
        assert!(matches!(io_err(Errno::NOSPC), VfsError::DiskFull));
        assert!(matches!(io_err(Errno::IO), VfsError::Io(_)));
    }
}
