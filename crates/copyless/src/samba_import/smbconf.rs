//! Samba's smb.conf, read the way Samba reads it: `[section]` lines and
//! `name = value` lines; a comment is a line whose first non-blank
//! character is `#` or `;` (never the rest of a line); a line ending in a
//! backslash goes on on the next one; runs of white space count as one
//! space; option names compare ignoring case, spaces and underscores; a
//! section seen twice is one section; `include = FILE` reads FILE in place.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Where something was written: the file, as named, and the 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    pub file: Rc<str>,
    pub line: usize,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One `name = value` line.
#[derive(Debug, Clone)]
pub struct Param {
    /// As written, for messages.
    pub name: String,
    /// The name compared as Samba compares it (see [`normalize`]).
    pub key: String,
    pub value: String,
    pub at: Origin,
}

#[derive(Debug)]
pub struct Section {
    pub name: String,
    /// Where it first appears.
    pub at: Origin,
    pub params: Vec<Param>,
}

#[derive(Debug)]
pub struct SmbConf {
    /// `[global]`, with the options written before any section.
    pub global: Section,
    /// Every other section, in the order they first appear.
    pub shares: Vec<Section>,
    /// Lines that are neither a section nor `name = value`, which Samba
    /// skips without a word.
    pub stray: Vec<(Origin, String)>,
}

/// Why an smb.conf cannot be read; Samba would refuse it too.
#[derive(Debug)]
pub struct ParseError {
    pub file: Rc<str>,
    pub line: Option<usize>,
    pub message: String,
}

impl ParseError {
    pub fn at(at: &Origin, message: impl Into<String>) -> ParseError {
        ParseError {
            file: at.file.clone(),
            line: Some(at.line),
            message: message.into(),
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ParseError {}

/// An option name as Samba compares them: case, spaces and underscores
/// do not count (`Read Only`, `read_only` and `readonly` are one option).
pub fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| !c.is_ascii_whitespace() && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// Reads `path` and the files it includes, each through `read`.
pub fn load(
    path: &Path,
    read: &mut dyn FnMut(&Path) -> io::Result<Vec<u8>>,
) -> Result<SmbConf, ParseError> {
    let shown: Rc<str> = Rc::from(path.display().to_string());
    let bytes = read(path).map_err(|e| ParseError {
        file: shown.clone(),
        line: None,
        message: format!("cannot read: {e}"),
    })?;
    let mut parser = Parser {
        read,
        conf: SmbConf {
            global: Section {
                name: "global".to_string(),
                at: Origin {
                    file: shown.clone(),
                    line: 1,
                },
                params: Vec::new(),
            },
            shares: Vec::new(),
            stray: Vec::new(),
        },
        current: None,
        reading: Vec::new(),
    };
    parser.file(path, shown, &bytes)?;
    Ok(parser.conf)
}

/// Includes deeper than this are taken for a loop through other names.
const MAX_INCLUDE_DEPTH: usize = 16;

struct Parser<'r> {
    read: &'r mut dyn FnMut(&Path) -> io::Result<Vec<u8>>,
    conf: SmbConf,
    /// The section options go to: None for `[global]`, else a share.
    current: Option<usize>,
    /// The files being read, outermost first.
    reading: Vec<PathBuf>,
}

impl Parser<'_> {
    fn file(&mut self, path: &Path, shown: Rc<str>, bytes: &[u8]) -> Result<(), ParseError> {
        self.reading.push(path.to_path_buf());
        for (line, text) in logical_lines(bytes, &shown)? {
            let at = Origin {
                file: shown.clone(),
                line,
            };
            self.line(path, at, &text)?;
        }
        self.reading.pop();
        Ok(())
    }

    fn line(&mut self, path: &Path, at: Origin, text: &str) -> Result<(), ParseError> {
        if let Some(rest) = text.strip_prefix('[') {
            // As Samba does, whatever follows the `]` is ignored.
            let Some((name, _)) = rest.split_once(']') else {
                return Err(ParseError::at(&at, "a `[` without its `]`"));
            };
            let name = name.trim();
            if name.is_empty() {
                return Err(ParseError::at(&at, "a section without a name"));
            }
            self.section(name, at);
            return Ok(());
        }
        let Some((name, value)) = text.split_once('=') else {
            self.conf.stray.push((at, text.to_string()));
            return Ok(());
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(ParseError::at(&at, "a value without an option name"));
        }
        let param = Param {
            name: name.to_string(),
            key: normalize(name),
            value: value.trim().to_string(),
            at,
        };
        // An include with substitutions is read anew for each client
        // (and `registry` means Samba's registry): the converter reports
        // those, so they stay options.
        if param.key == "include" && !param.value.contains('%') && param.value != "registry" {
            return self.include(path, &param);
        }
        let section = match self.current {
            None => &mut self.conf.global,
            Some(index) => &mut self.conf.shares[index],
        };
        section.params.push(param);
        Ok(())
    }

    fn section(&mut self, name: &str, at: Origin) {
        if name.eq_ignore_ascii_case("global") {
            self.current = None;
            return;
        }
        let existing = self
            .conf
            .shares
            .iter()
            .position(|s| s.name.to_lowercase() == name.to_lowercase());
        self.current = Some(existing.unwrap_or_else(|| {
            self.conf.shares.push(Section {
                name: name.to_string(),
                at,
                params: Vec::new(),
            });
            self.conf.shares.len() - 1
        }));
    }

    fn include(&mut self, from: &Path, param: &Param) -> Result<(), ParseError> {
        if param.value.is_empty() {
            return Err(ParseError::at(&param.at, "`include` names no file"));
        }
        // A relative name is taken from the including file's directory.
        let path = from.parent().unwrap_or(Path::new(".")).join(&param.value);
        if self.reading.contains(&path) {
            return Err(ParseError::at(
                &param.at,
                format!("`include = {}` includes itself", param.value),
            ));
        }
        if self.reading.len() >= MAX_INCLUDE_DEPTH {
            return Err(ParseError::at(
                &param.at,
                format!("includes nested more than {MAX_INCLUDE_DEPTH} deep"),
            ));
        }
        let bytes = (self.read)(&path).map_err(|e| {
            ParseError::at(
                &param.at,
                format!(
                    "`include = {}`: cannot read {}: {e}",
                    param.value,
                    path.display()
                ),
            )
        })?;
        let shown: Rc<str> = Rc::from(path.display().to_string());
        self.file(&path, shown, &bytes)
    }
}

/// The file's lines as Samba sees them, each with the number of its first
/// physical line: comments and blank lines left out, continued lines
/// joined, white space collapsed and trimmed.
fn logical_lines(bytes: &[u8], file: &Rc<str>) -> Result<Vec<(usize, String)>, ParseError> {
    let mut lines = Vec::new();
    // A line that ended in a backslash, waiting for the rest.
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let number = index + 1;
        let text = std::str::from_utf8(raw).map_err(|_| ParseError {
            file: file.clone(),
            line: Some(number),
            message: "not UTF-8 text".to_string(),
        })?;
        let (start, mut joined) = match pending.take() {
            // A continuation is never a comment, even if it looks like one.
            Some((start, so_far)) => (start, so_far + text),
            None => {
                let text = text.trim_start();
                if text.is_empty() || text.starts_with(['#', ';']) {
                    continue;
                }
                (number, text.to_string())
            }
        };
        match joined.trim_end().strip_suffix('\\') {
            Some(before) => {
                joined.truncate(before.len());
                pending = Some((start, joined));
            }
            None => lines.push((start, collapse(&joined))),
        }
    }
    if let Some((start, joined)) = pending {
        lines.push((start, collapse(&joined)));
    }
    Ok(lines)
}

/// Runs of white space as one space, none at either end.
fn collapse(text: &str) -> String {
    text.split_ascii_whitespace().collect::<Vec<_>>().join(" ")
}

/// The items of a list option, as Samba splits them: at white space,
/// commas and semicolons, except inside double quotes.
pub fn split_list(value: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut item = String::new();
    let mut quoted = false;
    for c in value.chars() {
        match c {
            '"' => quoted = !quoted,
            c if !quoted && (c.is_ascii_whitespace() || c == ',' || c == ';') => {
                if !item.is_empty() {
                    items.push(std::mem::take(&mut item));
                }
            }
            c => item.push(c),
        }
    }
    if !item.is_empty() {
        items.push(item);
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Loads `main.conf` from a set of in-memory files.
    fn load_files(files: &[(&str, &str)]) -> Result<SmbConf, ParseError> {
        let files: HashMap<PathBuf, Vec<u8>> = files
            .iter()
            .map(|(name, text)| (PathBuf::from(name), text.as_bytes().to_vec()))
            .collect();
        load(Path::new("/etc/samba/main.conf"), &mut |path| {
            files
                .get(path.strip_prefix("/etc/samba").unwrap_or(path))
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        })
    }

    fn parse(text: &str) -> SmbConf {
        load_files(&[("main.conf", text)]).unwrap_or_else(|e| panic!("{e}"))
    }

    fn error(text: &str) -> String {
        load_files(&[("main.conf", text)]).unwrap_err().to_string()
    }

    /// (name, value, line) of each option of a section.
    fn params(section: &Section) -> Vec<(&str, &str, usize)> {
        section
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.value.as_str(), p.at.line))
            .collect()
    }

    #[test]
    fn sections_options_and_comments() {
        let conf = parse(
            "# a comment\n\
             ; another\n\
             workgroup = HOME\n\
             \n\
             [global]\n\
             \t  netbios   name =  NAS  \n\
             [Data]\n\
             path = /srv/data # not a comment\n\
             read only=no\n\
             ; read only = yes\n",
        );
        assert_eq!(conf.global.name, "global");
        assert_eq!(
            params(&conf.global),
            [("workgroup", "HOME", 3), ("netbios name", "NAS", 6)]
        );
        assert_eq!(conf.shares.len(), 1);
        assert_eq!(conf.shares[0].name, "Data");
        assert_eq!(conf.shares[0].at.line, 7);
        assert_eq!(
            params(&conf.shares[0]),
            [
                ("path", "/srv/data # not a comment", 8),
                ("read only", "no", 9)
            ]
        );
        assert_eq!(conf.shares[0].params[1].key, "readonly");
        assert!(conf.stray.is_empty());
    }

    #[test]
    fn names_ignore_case_spaces_and_underscores() {
        assert_eq!(normalize("Read Only"), "readonly");
        assert_eq!(normalize("read_only"), "readonly");
        assert_eq!(normalize("READONLY"), "readonly");
        assert_eq!(
            normalize("acl_xattr:ignore system acls"),
            "aclxattr:ignoresystemacls"
        );
    }

    #[test]
    fn continued_lines_are_joined() {
        let conf = parse(
            "[s]\n\
             valid users = alice \\\n\
             \x20   bob\\\n\
             # carol\n\
             path = /srv/s \\  \n\
             \n\
             browseable = no\n",
        );
        assert_eq!(
            params(&conf.shares[0]),
            [
                ("valid users", "alice bob# carol", 2),
                ("path", "/srv/s", 5),
                ("browseable", "no", 7)
            ]
        );
    }

    #[test]
    fn a_section_seen_twice_is_one() {
        let conf = parse("[a]\npath = /a\n[global]\nx = 1\n[A]\nread only = no\n");
        assert_eq!(conf.shares.len(), 1);
        assert_eq!(
            params(&conf.shares[0]),
            [("path", "/a", 2), ("read only", "no", 6)]
        );
        assert_eq!(params(&conf.global), [("x", "1", 4)]);
    }

    #[test]
    fn includes_are_read_in_place() {
        let conf = load_files(&[
            (
                "main.conf",
                "[global]\ninclude = shares.conf\nworkgroup = W\n",
            ),
            ("shares.conf", "[music]\npath = /srv/music\n"),
        ])
        .unwrap();
        // The included file's section goes on after the include.
        assert_eq!(conf.shares[0].name, "music");
        assert_eq!(
            params(&conf.shares[0]),
            [("path", "/srv/music", 2), ("workgroup", "W", 3)]
        );
        assert_eq!(&*conf.shares[0].params[0].at.file, "/etc/samba/shares.conf");
        assert_eq!(&*conf.shares[0].params[1].at.file, "/etc/samba/main.conf");

        // Per-client includes stay options, for the converter to report.
        let conf = parse("include = /etc/samba/%m.conf\n");
        assert_eq!(params(&conf.global), [("include", "/etc/samba/%m.conf", 1)]);
    }

    #[test]
    fn include_errors_name_the_line() {
        let m = load_files(&[("main.conf", "\ninclude = missing.conf\n")])
            .unwrap_err()
            .to_string();
        assert!(
            m.starts_with("/etc/samba/main.conf:2: `include = missing.conf`: cannot read"),
            "{m}"
        );
        let m = load_files(&[
            ("main.conf", "include = a.conf\n"),
            ("a.conf", "\n\ninclude = main.conf\n"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            m.starts_with("/etc/samba/a.conf:3: `include = main.conf` includes itself"),
            "{m}"
        );
        assert!(error("include =\n").contains("names no file"));
    }

    #[test]
    fn malformed_lines() {
        assert_eq!(
            error("[global]\n\n[share\npath = /x\n"),
            "/etc/samba/main.conf:3: a `[` without its `]`"
        );
        assert_eq!(
            error("[ ]\n"),
            "/etc/samba/main.conf:1: a section without a name"
        );
        assert_eq!(
            error("[s]\n = /x\n"),
            "/etc/samba/main.conf:2: a value without an option name"
        );
        let m = load_files(&[]).unwrap_err().to_string();
        assert!(m.starts_with("/etc/samba/main.conf: cannot read"), "{m}");
        let bad = load(Path::new("x.conf"), &mut |_| {
            Ok(b"[s]\npath = /\xff\n".to_vec())
        })
        .unwrap_err()
        .to_string();
        assert_eq!(bad, "x.conf:2: not UTF-8 text");
        // Samba skips a line without `=`; so do we, but it is kept to tell.
        let conf = parse("[s]\npath = /x\nthis is odd\n");
        assert_eq!(conf.stray.len(), 1);
        assert_eq!(conf.stray[0].0.line, 3);
        assert_eq!(conf.stray[0].1, "this is odd");
    }

    #[test]
    fn windows_line_endings() {
        let conf = parse("[s]\r\npath = /srv/s\r\nread only = no \\\r\n\r\n");
        assert_eq!(
            params(&conf.shares[0]),
            [("path", "/srv/s", 2), ("read only", "no", 3)]
        );
    }

    #[test]
    fn lists_split_like_samba() {
        assert_eq!(
            split_list("alice, bob;carol\t@staff \"Domain Users\" +x"),
            ["alice", "bob", "carol", "@staff", "Domain Users", "+x"]
        );
        assert!(split_list(" , ").is_empty());
    }
}
