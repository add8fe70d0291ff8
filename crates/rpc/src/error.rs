use std::fmt;

/// Why a pipe write was refused. The SMB layer fails the WRITE or
/// FSCTL_PIPE_TRANSCEIVE that carried the bytes; the pipe's input buffer is
/// discarded because the byte stream can no longer be trusted to be in step.
#[derive(Debug)]
pub enum RpcError {
    /// The PDU framing is broken (bad version, length or layout).
    Malformed(&'static str),
    /// Well-formed but outside what we serve (big-endian data, an unexpected PDU type).
    Unsupported(&'static str),
    /// The client keeps writing without reading the replies.
    OutputFull,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RpcError::Malformed(what) => write!(f, "malformed DCE/RPC PDU: {what}"),
            RpcError::Unsupported(what) => write!(f, "unsupported DCE/RPC PDU: {what}"),
            RpcError::OutputFull => write!(f, "DCE/RPC output queue full"),
        }
    }
}

impl std::error::Error for RpcError {}
