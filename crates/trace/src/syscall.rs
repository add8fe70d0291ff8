//! Kinds of system call the server makes on a client's behalf: the
//! engine's socket calls, counted exactly, and calls into the share's VFS,
//! each of which is at least one system call.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syscall {
    Recv,
    Send,
    Open,
    Resolve,
    Stat,
    Read,
    Write,
    Flush,
    SetLen,
    SetAllocation,
    SetTimes,
    SetAttributes,
    ReadDir,
    Rename,
    Unlink,
    FsStat,
    Security,
    /// A file's holes: made sparse, zeroed, allocated ranges asked.
    Extents,
    /// Data copied (or cloned) inside the filesystem.
    Copy,
}

pub const SYSCALLS: usize = 19;

impl Syscall {
    pub const ALL: [Syscall; SYSCALLS] = [
        Syscall::Recv,
        Syscall::Send,
        Syscall::Open,
        Syscall::Resolve,
        Syscall::Stat,
        Syscall::Read,
        Syscall::Write,
        Syscall::Flush,
        Syscall::SetLen,
        Syscall::SetAllocation,
        Syscall::SetTimes,
        Syscall::SetAttributes,
        Syscall::ReadDir,
        Syscall::Rename,
        Syscall::Unlink,
        Syscall::FsStat,
        Syscall::Security,
        Syscall::Extents,
        Syscall::Copy,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Syscall::Recv => "recv",
            Syscall::Send => "send",
            Syscall::Open => "open",
            Syscall::Resolve => "resolve",
            Syscall::Stat => "stat",
            Syscall::Read => "read",
            Syscall::Write => "write",
            Syscall::Flush => "flush",
            Syscall::SetLen => "set_len",
            Syscall::SetAllocation => "set_allocation",
            Syscall::SetTimes => "set_times",
            Syscall::SetAttributes => "set_attributes",
            Syscall::ReadDir => "read_dir",
            Syscall::Rename => "rename",
            Syscall::Unlink => "unlink",
            Syscall::FsStat => "fs_stat",
            Syscall::Security => "security",
            Syscall::Extents => "extents",
            Syscall::Copy => "copy",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_the_order() {
        for (i, s) in Syscall::ALL.iter().enumerate() {
            assert_eq!(s.index(), i);
        }
        assert_eq!(Syscall::FsStat.name(), "fs_stat");
    }
}
