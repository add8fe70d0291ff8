//! Share-relative paths: validation, joining and case folding.

use crate::{VfsError, VfsResult};

/// Splits a share-relative path into its components; the empty path (the
/// root) has none. The core filters bad names already; this is the second
/// line of defense, so anything that could walk elsewhere is refused.
pub fn split(path: &str) -> VfsResult<Vec<&str>> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    if path.contains('\0') {
        return Err(VfsError::InvalidName);
    }
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts {
        if part.is_empty() || *part == "." || *part == ".." || part.contains('\\') {
            return Err(VfsError::InvalidName);
        }
    }
    Ok(parts)
}

pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        let mut s = String::with_capacity(dir.len() + 1 + name.len());
        s.push_str(dir);
        s.push('/');
        s.push_str(name);
        s
    }
}

/// The key names are compared by when matching case-insensitively.
pub fn fold(name: &str) -> String {
    name.chars().flat_map(char::to_lowercase).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_accepts_plain_paths() {
        assert!(split("").unwrap().is_empty());
        assert_eq!(split("a").unwrap(), vec!["a"]);
        assert_eq!(split("a/B c/d.txt").unwrap(), vec!["a", "B c", "d.txt"]);
        assert_eq!(split(".hidden/x").unwrap(), vec![".hidden", "x"]);
    }

    #[test]
    fn split_refuses_escapes_and_empty_components() {
        for bad in [
            "/a", "a/", "a//b", ".", "..", "a/../b", "a/./b", "a\0b", "a\\b", "../etc",
        ] {
            assert!(
                matches!(split(bad), Err(VfsError::InvalidName)),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn join_and_fold() {
        assert_eq!(join("", "x"), "x");
        assert_eq!(join("a/b", "x"), "a/b/x");
        assert_eq!(fold("File.TXT"), "file.txt");
        assert_eq!(fold("ÄÖÜ"), "äöü");
    }
}
