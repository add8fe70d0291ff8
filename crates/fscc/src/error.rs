use std::fmt;

/// Why an information class could not be encoded or decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InfoError {
    /// The class is unknown or not served: STATUS_INVALID_INFO_CLASS.
    InvalidClass,
    /// The buffer is shorter than the class's fixed part: STATUS_INFO_LENGTH_MISMATCH.
    BufferTooSmall,
    /// The content is malformed (bad length, bad UTF-16): STATUS_INVALID_PARAMETER.
    InvalidParameter,
    /// A class that exists but is not served to remote clients, such as
    /// FileNameInformation (MS-FSA 2.1.5.12.19): STATUS_NOT_SUPPORTED.
    NotSupported,
    /// An EA list whose entries do not add up (MS-FSCC 2.4.15):
    /// STATUS_EA_LIST_INCONSISTENT.
    EaListInconsistent,
    /// An EA name (or flag) no EA may have: STATUS_INVALID_EA_NAME.
    InvalidEaName,
}

impl InfoError {
    /// The NTSTATUS a Windows server answers with for this error.
    pub fn ntstatus(self) -> u32 {
        match self {
            InfoError::InvalidClass => 0xC000_0003,
            InfoError::BufferTooSmall => 0xC000_0004,
            InfoError::InvalidParameter => 0xC000_000D,
            InfoError::NotSupported => 0xC000_00BB,
            InfoError::EaListInconsistent => 0x8000_0014,
            InfoError::InvalidEaName => 0x8000_0013,
        }
    }
}

impl fmt::Display for InfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            InfoError::InvalidClass => "invalid information class",
            InfoError::BufferTooSmall => "information buffer too small",
            InfoError::InvalidParameter => "invalid parameter in information buffer",
            InfoError::NotSupported => "information class not supported",
            InfoError::EaListInconsistent => "inconsistent EA list",
            InfoError::InvalidEaName => "invalid EA name",
        };
        f.write_str(s)
    }
}

impl std::error::Error for InfoError {}
