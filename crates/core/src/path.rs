//! Turning the name in an SMB2 request into a path beneath the share root.

use copyless_proto::status::{self, NtStatus};
use copyless_proto::utf16;

/// The longest component NTFS accepts, in UTF-16 units.
const MAX_COMPONENT_UNITS: usize = 255;

/// Validates a CREATE name (UTF-16LE, `\` separated, relative to the share
/// root) and returns the VFS path (`/` separated, empty for the root).
pub fn from_smb(name: &[u8]) -> Result<String, NtStatus> {
    let name = utf16::decode(name).map_err(|_| status::OBJECT_NAME_INVALID)?;
    from_smb_str(&name)
}

pub fn from_smb_str(name: &str) -> Result<String, NtStatus> {
    if name.starts_with('\\') {
        return Err(status::INVALID_PARAMETER);
    }
    let name = strip_data_stream(name)?;
    let trimmed = name.strip_suffix('\\').unwrap_or(name);
    if trimmed.is_empty() {
        return if name.is_empty() {
            Ok(String::new())
        } else {
            Err(status::OBJECT_NAME_INVALID)
        };
    }
    let mut out = String::with_capacity(trimmed.len());
    for comp in trimmed.split('\\') {
        check_component(comp)?;
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(comp);
    }
    Ok(out)
}

/// `name::$DATA` names the default stream, which is the file itself.
/// Other streams are not supported.
fn strip_data_stream(name: &str) -> Result<&str, NtStatus> {
    match name.find(':') {
        None => Ok(name),
        Some(i) => {
            let (base, stream) = name.split_at(i);
            if stream.eq_ignore_ascii_case("::$DATA") || stream.eq_ignore_ascii_case(":$DATA") {
                Ok(base)
            } else {
                Err(status::OBJECT_NAME_NOT_FOUND)
            }
        }
    }
}

pub fn check_component(comp: &str) -> Result<(), NtStatus> {
    match comp {
        "" | "." => return Err(status::OBJECT_NAME_INVALID),
        ".." => return Err(status::OBJECT_PATH_SYNTAX_BAD),
        _ => {}
    }
    if comp.encode_utf16().count() > MAX_COMPONENT_UNITS {
        return Err(status::OBJECT_NAME_INVALID);
    }
    let bad =
        |c: char| matches!(c, '<' | '>' | '"' | '|' | '?' | '*' | '/' | ':') || (c as u32) < 0x20;
    if comp.chars().any(bad) {
        return Err(status::OBJECT_NAME_INVALID);
    }
    Ok(())
}

/// The last component of a VFS path.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The path as Windows shows it in FileAllInformation: `\dir\file`.
pub fn to_windows(path: &str) -> String {
    let mut s = String::with_capacity(path.len() + 1);
    s.push('\\');
    s.push_str(&path.replace('/', "\\"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes() {
        assert_eq!(from_smb_str("").unwrap(), "");
        assert_eq!(from_smb_str("a\\b\\c.txt").unwrap(), "a/b/c.txt");
        assert_eq!(from_smb_str("dir\\").unwrap(), "dir");
        assert_eq!(from_smb_str("f::$DATA").unwrap(), "f");
        assert_eq!(from_smb_str("\\a"), Err(status::INVALID_PARAMETER));
        assert_eq!(
            from_smb_str("a\\..\\b"),
            Err(status::OBJECT_PATH_SYNTAX_BAD)
        );
        assert_eq!(from_smb_str("a\\\\b"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(from_smb_str("a*"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(from_smb_str("a/b"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(from_smb_str("f:stream"), Err(status::OBJECT_NAME_NOT_FOUND));
        assert_eq!(to_windows("a/b"), "\\a\\b");
        assert_eq!(file_name("a/b"), "b");
    }
}
