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
    let name = from_smb_str_with_stream(name)?;
    match name.stream {
        None => Ok(name.path),
        // Only CREATE opens alternate data streams.
        Some(_) => Err(status::OBJECT_NAME_NOT_FOUND),
    }
}

/// What a CREATE name names (MS-FSCC 2.1.5).
#[derive(Debug, PartialEq, Eq)]
pub struct CreateName {
    /// The VFS path.
    pub path: String,
    /// The alternate data stream; None for the main data.
    pub stream: Option<String>,
    /// The name gave the stream type `$DATA`, so it names a data stream,
    /// never a directory (`dir::$DATA`).
    pub data_type: bool,
}

/// A CREATE name that may name an alternate data stream.
pub fn from_smb_with_stream(name: &[u8]) -> Result<CreateName, NtStatus> {
    let name = utf16::decode(name).map_err(|_| status::OBJECT_NAME_INVALID)?;
    from_smb_str_with_stream(&name)
}

fn from_smb_str_with_stream(name: &str) -> Result<CreateName, NtStatus> {
    if name.starts_with(SEPARATORS) {
        return Err(status::INVALID_PARAMETER);
    }
    let (name, stream, data_type) = split_stream(name)?;
    if stream.is_some() && name.is_empty() {
        return Err(status::OBJECT_NAME_INVALID);
    }
    Ok(CreateName {
        path: path_of(name)?,
        stream,
        data_type,
    })
}

/// `path` without the first of its components that is an @GMT token
/// (`@GMT-YYYY.MM.DD-HH.MM.SS`, MS-SMB2 3.3.5.9.6), and the time that
/// token names; a path without one (nearly every CREATE's) comes back
/// as it was.
pub fn without_gmt_token(path: String) -> (String, Option<u64>) {
    if !path.contains("@GMT-") {
        return (path, None);
    }
    let mut parts: Vec<&str> = path.split('/').collect();
    match parts
        .iter()
        .position(|p| copyless_vfs::snapshots::parse_token(p).is_some())
    {
        Some(i) => {
            let when = copyless_vfs::snapshots::parse_token(parts.remove(i));
            (parts.join("/"), when)
        }
        None => (path, None),
    }
}

/// What separates a name's components. `\\` is Windows'; `/` is taken
/// too, as Samba and ksmbd take it, for clients that send Unix-style
/// names (smbtorture among them), though never at the end of a name
/// (MS-FSA 2.1.5.1).
const SEPARATORS: [char; 2] = ['\\', '/'];

fn path_of(name: &str) -> Result<String, NtStatus> {
    if name.ends_with('/') {
        return Err(status::OBJECT_NAME_INVALID);
    }
    let trimmed = name.strip_suffix('\\').unwrap_or(name);
    if trimmed.is_empty() {
        return if name.is_empty() {
            Ok(String::new())
        } else {
            Err(status::OBJECT_NAME_INVALID)
        };
    }
    let mut out = String::with_capacity(trimmed.len());
    for comp in trimmed.split(SEPARATORS) {
        // `a\b\..` names `a`, as on Windows; above the share root there
        // is nothing to name.
        if comp == ".." && !out.is_empty() {
            let parent = out.rfind('/').unwrap_or(0);
            out.truncate(parent);
            continue;
        }
        check_component(comp)?;
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(comp);
    }
    Ok(out)
}

/// Splits `file:stream:$DATA` (MS-FSCC 2.1.5) into the file, the stream
/// and whether the type was given: `file::$DATA` and `file:$DATA`... name
/// the main data; a stream type other than $DATA is not served.
fn split_stream(name: &str) -> Result<(&str, Option<String>, bool), NtStatus> {
    let Some(i) = name.find(':') else {
        return Ok((name, None, false));
    };
    let (base, rest) = (&name[..i], &name[i + 1..]);
    let (stream, kind) = match rest.split_once(':') {
        Some((s, k)) => (s, Some(k)),
        None => (rest, None),
    };
    if let Some(k) = kind {
        if !k.eq_ignore_ascii_case("$DATA") {
            return Err(status::OBJECT_NAME_INVALID);
        }
    }
    if stream.is_empty() || (kind.is_none() && stream.eq_ignore_ascii_case("$DATA")) {
        return if kind.is_none() && stream.is_empty() {
            // "file:" names nothing.
            Err(status::OBJECT_NAME_INVALID)
        } else {
            Ok((base, None, kind.is_some()))
        };
    }
    let bad = |c: char| matches!(c, '\\' | '/' | ':' | '\0');
    if stream.chars().any(bad) || stream.encode_utf16().count() > MAX_COMPONENT_UNITS {
        return Err(status::OBJECT_NAME_INVALID);
    }
    Ok((base, Some(stream.to_owned()), kind.is_some()))
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

/// The folder a VFS path is in ("" for the share's root and what lies
/// directly in it).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
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
    fn a_gmt_token_names_a_snapshot() {
        let when = copyless_vfs::snapshots::parse_token("@GMT-2026.11.29-22.00.00");
        assert!(when.is_some());
        for (path, rest) in [
            ("@GMT-2026.11.29-22.00.00/a/b", "a/b"),
            ("a/@GMT-2026.11.29-22.00.00/b", "a/b"),
            ("@GMT-2026.11.29-22.00.00", ""),
        ] {
            assert_eq!(without_gmt_token(path.into()), (rest.to_string(), when));
        }
        for plain in [
            "a/b",
            "@GMT-2026.11.29-22.00/a",
            "x@GMT-2026.11.29-22.00.00",
        ] {
            assert_eq!(without_gmt_token(plain.into()), (plain.to_string(), None));
        }
    }

    #[test]
    fn normalizes() {
        assert_eq!(from_smb_str("").unwrap(), "");
        assert_eq!(from_smb_str("a\\b\\c.txt").unwrap(), "a/b/c.txt");
        assert_eq!(from_smb_str("dir\\").unwrap(), "dir");
        assert_eq!(from_smb_str("f::$DATA").unwrap(), "f");
        assert_eq!(from_smb_str("\\a"), Err(status::INVALID_PARAMETER));
        assert_eq!(from_smb_str("a\\..\\b").unwrap(), "b");
        assert_eq!(from_smb_str("a\\b\\..").unwrap(), "a");
        assert_eq!(
            from_smb_str("..\\a"),
            Err(status::OBJECT_PATH_SYNTAX_BAD),
            "nothing above the share root"
        );
        assert_eq!(
            from_smb_str("a\\..\\.."),
            Err(status::OBJECT_PATH_SYNTAX_BAD)
        );
        assert_eq!(from_smb_str("a\\\\b"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(from_smb_str("a*"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(from_smb_str("a/b\\c").unwrap(), "a/b/c");
        assert_eq!(from_smb_str("a/b/"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(from_smb_str("/a"), Err(status::INVALID_PARAMETER));
        assert_eq!(from_smb_str("a//b"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(from_smb_str("a/../.."), Err(status::OBJECT_PATH_SYNTAX_BAD));
        assert_eq!(from_smb_str("f:stream"), Err(status::OBJECT_NAME_NOT_FOUND));
        let with = |s: &str| from_smb_str_with_stream(s).map(|n| (n.path, n.stream, n.data_type));
        assert_eq!(
            with("d\\f:foo").unwrap(),
            ("d/f".into(), Some("foo".into()), false)
        );
        assert_eq!(
            with("f:foo:$DATA").unwrap(),
            ("f".into(), Some("foo".into()), true)
        );
        assert_eq!(with("f::$DATA").unwrap(), ("f".into(), None, true));
        assert_eq!(with("f:$DATA").unwrap(), ("f".into(), None, false));
        assert_eq!(
            with("f:foo:$INDEX_ALLOCATION"),
            Err(status::OBJECT_NAME_INVALID)
        );
        assert_eq!(with("f:"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(with(":foo"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(with("f:a:b:c"), Err(status::OBJECT_NAME_INVALID));
        assert_eq!(to_windows("a/b"), "\\a\\b");
        assert_eq!(file_name("a/b"), "b");
    }
}
