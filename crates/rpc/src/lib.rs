//! DCE/RPC (connection-oriented, MS-RPCE / C706) over SMB named pipes,
//! serving the `srvsvc` interface (MS-SRVS) so clients can list shares.
//!
//! Sans-IO: the SMB layer feeds the bytes a client writes to a pipe into
//! [`Pipe::write`] and hands back what [`Pipe::read`] returns. Only the NDR20
//! transfer syntax and little-endian data representation are supported.

mod error;
mod ndr;
mod pdu;
mod pipe;
mod srvsvc;

pub use error::RpcError;
pub use pipe::Pipe;

/// What kind of resource a share is, as reported by srvsvc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    Disk,
    Ipc,
}

/// One share as listed by NetrShareEnum / NetrShareGetInfo.
#[derive(Debug, Clone)]
pub struct ShareInfo {
    pub name: String,
    pub kind: ShareKind,
    pub comment: String,
    pub path: String,
    /// Listed by NetrShareEnum; a share that is not can still be asked
    /// for by name.
    pub browseable: bool,
}

/// Pipe names served (compared case-insensitively, without any leading "\\PIPE\\" or "\\"): "srvsvc".
pub fn is_known_pipe(name: &str) -> bool {
    pipe::canonical_pipe_name(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_pipe_names() {
        assert!(is_known_pipe("srvsvc"));
        assert!(is_known_pipe("SRVSVC"));
        assert!(is_known_pipe("\\srvsvc"));
        assert!(is_known_pipe("\\PIPE\\srvsvc"));
        assert!(is_known_pipe("\\pipe\\SrvSvc"));
        assert!(!is_known_pipe("lsarpc"));
        assert!(!is_known_pipe("\\PIPE\\"));
        assert!(!is_known_pipe(""));
        assert!(!is_known_pipe("srvsvc2"));
    }
}
