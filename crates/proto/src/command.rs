//! SMB2 command codes (MS-SMB2 2.2.1).

pub const NEGOTIATE: u16 = 0x0000;
pub const SESSION_SETUP: u16 = 0x0001;
pub const LOGOFF: u16 = 0x0002;
pub const TREE_CONNECT: u16 = 0x0003;
pub const TREE_DISCONNECT: u16 = 0x0004;
pub const CREATE: u16 = 0x0005;
pub const CLOSE: u16 = 0x0006;
pub const FLUSH: u16 = 0x0007;
pub const READ: u16 = 0x0008;
pub const WRITE: u16 = 0x0009;
pub const LOCK: u16 = 0x000A;
pub const IOCTL: u16 = 0x000B;
pub const CANCEL: u16 = 0x000C;
pub const ECHO: u16 = 0x000D;
pub const QUERY_DIRECTORY: u16 = 0x000E;
pub const CHANGE_NOTIFY: u16 = 0x000F;
pub const QUERY_INFO: u16 = 0x0010;
pub const SET_INFO: u16 = 0x0011;
pub const OPLOCK_BREAK: u16 = 0x0012;

pub const COUNT: usize = 19;

pub fn name(cmd: u16) -> &'static str {
    const NAMES: [&str; COUNT] = [
        "NEGOTIATE",
        "SESSION_SETUP",
        "LOGOFF",
        "TREE_CONNECT",
        "TREE_DISCONNECT",
        "CREATE",
        "CLOSE",
        "FLUSH",
        "READ",
        "WRITE",
        "LOCK",
        "IOCTL",
        "CANCEL",
        "ECHO",
        "QUERY_DIRECTORY",
        "CHANGE_NOTIFY",
        "QUERY_INFO",
        "SET_INFO",
        "OPLOCK_BREAK",
    ];
    NAMES.get(cmd as usize).copied().unwrap_or("UNKNOWN")
}
