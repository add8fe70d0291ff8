//! Alternate data streams ("file:name"), each kept whole in a user xattr
//! `user.copyless.stream.<name>` of the object it belongs to, so it moves
//! with renames and goes with the file. Windows clients keep small things
//! there (Zone.Identifier, macOS Finder info); Linux bounds an xattr value
//! at 64 KiB, and ext4 without `ea_inode` at what fits in one block, so a
//! write past what the filesystem holds fails with DiskFull.
//!
//! Reads and writes go through the whole value; writes of one file's
//! streams are serialized by the caller.

use std::os::fd::BorrowedFd;

use rustix::buffer::spare_capacity;
use rustix::fs::{fgetxattr, fgetxattr_query, flistxattr, fremovexattr, fsetxattr, XattrFlags};
use rustix::io::Errno;

use super::errno::io_err;
use crate::names::fold;
use crate::{VfsError, VfsResult};

const PREFIX: &str = "user.copyless.stream.";
/// The largest value Linux accepts for one xattr.
pub const MAX_LEN: usize = 65536;

fn key(name: &str) -> String {
    format!("{PREFIX}{name}")
}

fn err(e: Errno) -> VfsError {
    match e {
        Errno::NODATA => VfsError::NameNotFound,
        Errno::OPNOTSUPP => VfsError::NotSupported,
        Errno::TOOBIG | Errno::RANGE | Errno::NOSPC | Errno::DQUOT => VfsError::DiskFull,
        e => io_err(e),
    }
}

/// The stored name of stream `name`, matched case-insensitively.
pub fn find(fd: BorrowedFd<'_>, name: &str) -> VfsResult<Option<String>> {
    if key(name).len() > 255 {
        return Ok(None);
    }
    match fgetxattr(fd, key(name), &mut [0u8; 1]) {
        Ok(_) | Err(Errno::RANGE) => return Ok(Some(name.to_owned())),
        Err(Errno::NODATA) => {}
        Err(Errno::OPNOTSUPP) => return Ok(None),
        Err(e) => return Err(err(e)),
    }
    let want = fold(name);
    Ok(list(fd)?
        .into_iter()
        .map(|(n, _)| n)
        .find(|n| fold(n) == want))
}

/// Every stream of the object with its size.
pub fn list(fd: BorrowedFd<'_>) -> VfsResult<Vec<(String, u64)>> {
    let mut names = vec![0u8; 4096];
    let n = loop {
        match flistxattr(fd, &mut names) {
            Ok(n) => break n,
            Err(Errno::RANGE) if names.len() < MAX_LEN => names.resize(MAX_LEN, 0),
            Err(Errno::OPNOTSUPP) => return Ok(Vec::new()),
            Err(e) => return Err(err(e)),
        }
    };
    let mut out = Vec::new();
    for raw in names[..n].split(|&b| b == 0) {
        let Some(name) = std::str::from_utf8(raw)
            .ok()
            .and_then(|s| s.strip_prefix(PREFIX))
        else {
            continue;
        };
        // Only the size: a read of the value would fill 64 KiB per stream.
        match fgetxattr_query(fd, key(name)).map_err(err) {
            Ok(len) => out.push((name.to_owned(), len as u64)),
            Err(VfsError::NameNotFound) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The size of stream `name`.
pub fn len(fd: BorrowedFd<'_>, name: &str) -> VfsResult<u64> {
    Ok(fgetxattr_query(fd, key(name)).map_err(err)? as u64)
}

pub fn get(fd: BorrowedFd<'_>, name: &str) -> VfsResult<Vec<u8>> {
    // No value is larger, so one call always fits; the room is reserved,
    // not filled.
    let mut buf = Vec::with_capacity(MAX_LEN);
    fgetxattr(fd, key(name), spare_capacity(&mut buf)).map_err(err)?;
    Ok(buf)
}

pub fn put(fd: BorrowedFd<'_>, name: &str, data: &[u8]) -> VfsResult<()> {
    if data.len() > MAX_LEN {
        return Err(VfsError::DiskFull);
    }
    // Linux caps xattr names at 255 bytes, prefix included.
    if key(name).len() > 255 {
        return Err(VfsError::InvalidName);
    }
    fsetxattr(fd, key(name), data, XattrFlags::empty()).map_err(err)
}

/// Creates an empty stream; Collision if it exists.
pub fn create(fd: BorrowedFd<'_>, name: &str) -> VfsResult<()> {
    // Linux caps xattr names at 255 bytes, prefix included.
    if key(name).len() > 255 {
        return Err(VfsError::InvalidName);
    }
    match fsetxattr(fd, key(name), &[], XattrFlags::CREATE) {
        Err(Errno::EXIST) => Err(VfsError::Collision),
        r => r.map_err(err),
    }
}

pub fn remove(fd: BorrowedFd<'_>, name: &str) -> VfsResult<()> {
    match fremovexattr(fd, key(name)) {
        Err(Errno::NODATA) => Ok(()),
        r => r.map_err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn create_write_find_list_remove() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::File::create(dir.path().join("f")).unwrap();
        let fd = f.as_fd();
        assert_eq!(find(fd, "Zone").unwrap(), None);
        create(fd, "Zone").unwrap();
        assert!(matches!(create(fd, "Zone"), Err(VfsError::Collision)));
        put(fd, "Zone", b"hello").unwrap();
        assert_eq!(get(fd, "Zone").unwrap(), b"hello");
        assert_eq!(find(fd, "zONE").unwrap().as_deref(), Some("Zone"));
        assert_eq!(list(fd).unwrap(), vec![("Zone".to_string(), 5)]);
        assert!(matches!(
            put(fd, "Zone", &vec![0; MAX_LEN + 1]),
            Err(VfsError::DiskFull)
        ));
        remove(fd, "Zone").unwrap();
        assert_eq!(find(fd, "Zone").unwrap(), None);
        assert!(matches!(get(fd, "Zone"), Err(VfsError::NameNotFound)));
    }
}
