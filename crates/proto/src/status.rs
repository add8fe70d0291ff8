//! NTSTATUS values (MS-ERREF 2.3) that the server sends.

pub type NtStatus = u32;

pub const SUCCESS: NtStatus = 0x0000_0000;
pub const PENDING: NtStatus = 0x0000_0103;
pub const NOTIFY_ENUM_DIR: NtStatus = 0x0000_010C;
pub const NOTIFY_CLEANUP: NtStatus = 0x0000_010B;
pub const BUFFER_OVERFLOW: NtStatus = 0x8000_0005;
pub const NO_MORE_FILES: NtStatus = 0x8000_0006;
pub const UNSUCCESSFUL: NtStatus = 0xC000_0001;
pub const NOT_IMPLEMENTED: NtStatus = 0xC000_0002;
pub const INVALID_INFO_CLASS: NtStatus = 0xC000_0003;
pub const INFO_LENGTH_MISMATCH: NtStatus = 0xC000_0004;
pub const INVALID_HANDLE: NtStatus = 0xC000_0008;
pub const INVALID_PARAMETER: NtStatus = 0xC000_000D;
pub const NO_SUCH_FILE: NtStatus = 0xC000_000F;
pub const INVALID_DEVICE_REQUEST: NtStatus = 0xC000_0010;
pub const END_OF_FILE: NtStatus = 0xC000_0011;
pub const MORE_PROCESSING_REQUIRED: NtStatus = 0xC000_0016;
pub const NO_MEMORY: NtStatus = 0xC000_0017;
pub const ACCESS_DENIED: NtStatus = 0xC000_0022;
pub const FILE_LOCK_CONFLICT: NtStatus = 0xC000_0054;
pub const LOCK_NOT_GRANTED: NtStatus = 0xC000_0055;
/// A SID that may not be made the owner of an object (MS-ERREF 2.3).
pub const INVALID_OWNER: NtStatus = 0xC000_005A;
pub const RANGE_NOT_LOCKED: NtStatus = 0xC000_007E;
pub const INVALID_OPLOCK_PROTOCOL: NtStatus = 0xC000_00E3;
pub const INVALID_DEVICE_STATE: NtStatus = 0xC000_0184;
pub const INVALID_LOCK_RANGE: NtStatus = 0xC000_01A1;
pub const BUFFER_TOO_SMALL: NtStatus = 0xC000_0023;
pub const OBJECT_TYPE_MISMATCH: NtStatus = 0xC000_0024;
pub const OBJECT_NAME_INVALID: NtStatus = 0xC000_0033;
pub const OBJECT_NAME_NOT_FOUND: NtStatus = 0xC000_0034;
pub const OBJECT_NAME_COLLISION: NtStatus = 0xC000_0035;
pub const OBJECT_PATH_INVALID: NtStatus = 0xC000_0039;
pub const OBJECT_PATH_NOT_FOUND: NtStatus = 0xC000_003A;
pub const OBJECT_PATH_SYNTAX_BAD: NtStatus = 0xC000_003B;
pub const SHARING_VIOLATION: NtStatus = 0xC000_0043;
pub const DELETE_PENDING: NtStatus = 0xC000_0056;
pub const PRIVILEGE_NOT_HELD: NtStatus = 0xC000_0061;
pub const LOGON_FAILURE: NtStatus = 0xC000_006D;
pub const ACCOUNT_RESTRICTION: NtStatus = 0xC000_006E;
pub const DISK_FULL: NtStatus = 0xC000_007F;
pub const INSUFFICIENT_RESOURCES: NtStatus = 0xC000_009A;
pub const FILE_IS_A_DIRECTORY: NtStatus = 0xC000_00BA;
pub const NOT_SUPPORTED: NtStatus = 0xC000_00BB;
pub const NETWORK_NAME_DELETED: NtStatus = 0xC000_00C9;
pub const BAD_NETWORK_NAME: NtStatus = 0xC000_00CC;
pub const REQUEST_NOT_ACCEPTED: NtStatus = 0xC000_00D0;
pub const REQUEST_OUT_OF_SEQUENCE: NtStatus = 0xC000_042A;
pub const BAD_IMPERSONATION_LEVEL: NtStatus = 0xC000_00A5;
pub const INTERNAL_ERROR: NtStatus = 0xC000_00E5;
pub const DIRECTORY_NOT_EMPTY: NtStatus = 0xC000_0101;
pub const NOT_A_DIRECTORY: NtStatus = 0xC000_0103;
pub const CANCELLED: NtStatus = 0xC000_0120;
pub const FILE_CLOSED: NtStatus = 0xC000_0128;
pub const INVALID_LEVEL: NtStatus = 0xC000_0148;
pub const PIPE_BROKEN: NtStatus = 0xC000_014B;
pub const USER_SESSION_DELETED: NtStatus = 0xC000_0203;
pub const NOT_FOUND: NtStatus = 0xC000_0225;
pub const CANNOT_DELETE: NtStatus = 0xC000_0121;
pub const FS_DRIVER_REQUIRED: NtStatus = 0xC000_019C;
pub const NETWORK_SESSION_EXPIRED: NtStatus = 0xC000_035C;
pub const INVALID_NETWORK_RESPONSE: NtStatus = 0xC000_00C3;
pub const NO_SUCH_DEVICE: NtStatus = 0xC000_000E;

/// True for statuses whose reply still carries a body of the command's own
/// shape (warnings and the session-setup continuation), not an error body.
pub fn has_command_body(status: NtStatus) -> bool {
    status & 0xC000_0000 != 0xC000_0000 || status == MORE_PROCESSING_REQUIRED
}
