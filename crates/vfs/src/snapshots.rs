//! Earlier states of a share, as Windows' Previous Versions shows them:
//! read-only copies of the share's tree, each named by the time it was
//! taken as an `@GMT-YYYY.MM.DD-HH.MM.SS` token (MS-SMB2 2.2.32.2).
//! Where they are depends on who makes them:
//!
//! - btrfs: read-only snapshots of the share's subvolume in its
//!   `.snapshots` folder, as snapper keeps them (`N/snapshot`, timed by
//!   `N/info.xml`) or named by their token;
//! - ZFS: the dataset's `.zfs/snapshot`, snapshots named by their token
//!   (`zfs snapshot pool/share@GMT-2026.11.29-22.00.00`);
//! - a folder of `@GMT-…` folders, one copy of the share each, as Samba's
//!   shadow_copy2 reads rsnapshot-style layouts.
//!
//! Each is served through a [`PosixVfs`] of its own, opened when first
//! asked for.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::posix::{filetime_from_unix, unix_from_filetime, PosixVfs};
use crate::{Vfs, VfsError, VfsResult};

/// Where a share's snapshots are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Btrfs,
    Zfs,
    /// A folder of `@GMT-…` folders: absolute, or relative to the share.
    Dir(PathBuf),
}

/// The snapshots opened at most: each holds a descriptor and a cache.
const MAX_OPENED: usize = 64;

pub struct Snapshots {
    share_root: PathBuf,
    source: Source,
    opened: Mutex<HashMap<u64, Arc<PosixVfs>>>,
}

impl std::fmt::Debug for Snapshots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshots")
            .field("share_root", &self.share_root)
            .field("source", &self.source)
            .finish()
    }
}

impl Snapshots {
    pub fn new(share_root: &Path, source: Source) -> Snapshots {
        Snapshots {
            share_root: share_root.to_path_buf(),
            source,
            opened: Mutex::new(HashMap::new()),
        }
    }

    /// The folder the snapshots are found in.
    pub fn folder(&self) -> PathBuf {
        match &self.source {
            Source::Btrfs => self.share_root.join(".snapshots"),
            Source::Zfs => self.share_root.join(".zfs/snapshot"),
            Source::Dir(d) => self.share_root.join(d),
        }
    }

    /// The name, in the share's root, of the folder that holds the
    /// snapshots when it lies there (which listings leave out).
    pub fn folder_in_share(&self) -> Option<String> {
        let folder = self.folder();
        let rest = folder.strip_prefix(&self.share_root).ok()?;
        let first = rest.components().next()?;
        first.as_os_str().to_str().map(str::to_owned)
    }

    /// Every snapshot's time (FILETIME, whole seconds) and tree, newest
    /// first; none when the folder is not there.
    pub fn list(&self) -> VfsResult<Vec<(u64, PathBuf)>> {
        let folder = self.folder();
        let entries = match std::fs::read_dir(&folder) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(VfsError::Io(e)),
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry.map_err(VfsError::Io)?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = entry.path();
            if let Some(time) = time_in_name(name) {
                found.push((time, path));
            } else if self.source == Source::Btrfs {
                // snapper: N/snapshot, taken at N/info.xml's <date>.
                let info = std::fs::read_to_string(path.join("info.xml")).ok();
                if let Some(time) = info.as_deref().and_then(snapper_date) {
                    found.push((time, path.join("snapshot")));
                }
            }
        }
        found.sort_by_key(|s| std::cmp::Reverse(s.0));
        found.dedup_by_key(|s| s.0);
        Ok(found)
    }

    /// Every snapshot's time, newest first.
    pub fn times(&self) -> VfsResult<Vec<u64>> {
        Ok(self.list()?.into_iter().map(|(t, _)| t).collect())
    }

    /// The share as it was at `time` (to the second), read only; None
    /// when no snapshot was taken then.
    pub fn at(&self, time: u64) -> VfsResult<Option<Arc<dyn Vfs>>> {
        let time = time - time % TICKS_PER_SEC;
        if let Some(vfs) = self.opened().get(&time) {
            return Ok(Some(vfs.clone()));
        }
        match self.list()?.into_iter().find(|(t, _)| *t == time) {
            Some((time, tree)) => self.open(time, &tree).map(Some),
            None => Ok(None),
        }
    }

    /// The snapshot taken at `time`, whose tree [`Snapshots::list`] gave.
    pub fn open(&self, time: u64, tree: &Path) -> VfsResult<Arc<dyn Vfs>> {
        let mut opened = self.opened();
        if let Some(vfs) = opened.get(&time) {
            return Ok(vfs.clone());
        }
        let vfs = Arc::new(PosixVfs::new(tree).map_err(VfsError::Io)?);
        if opened.len() >= MAX_OPENED {
            opened.clear();
        }
        opened.insert(time, vfs.clone());
        Ok(vfs)
    }

    fn opened(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<PosixVfs>>> {
        self.opened.lock().unwrap_or_else(|e| e.into_inner())
    }
}

const TICKS_PER_SEC: u64 = 10_000_000;
/// `@GMT-YYYY.MM.DD-HH.MM.SS`
pub const TOKEN_LEN: usize = 24;

/// The token of a time (FILETIME), as Windows writes it.
pub fn token(filetime: u64) -> String {
    let (secs, _) = unix_from_filetime(filetime);
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "@GMT-{y:04}.{m:02}.{d:02}-{:02}.{:02}.{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The time (FILETIME) `@GMT-YYYY.MM.DD-HH.MM.SS` names; None for
/// anything else.
pub fn parse_token(s: &str) -> Option<u64> {
    let rest = s.strip_prefix('@')?;
    (rest.len() == TOKEN_LEN - 1).then_some(())?;
    parse_gmt(rest)
}

/// `GMT-YYYY.MM.DD-HH.MM.SS` at the start of `s`.
fn parse_gmt(s: &str) -> Option<u64> {
    let b = s.get(..TOKEN_LEN - 1)?.as_bytes();
    if !b.starts_with(b"GMT-") {
        return None;
    }
    let b = &b[4..];
    let seps = [(4, b'.'), (7, b'.'), (10, b'-'), (13, b'.'), (16, b'.')];
    if seps.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = &b[from..from + len];
        digits.iter().all(u8::is_ascii_digit).then_some(())?;
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    datetime(y, mo, d, h, mi, sec)
}

/// A snapshot folder's time from its name: the token anywhere in it,
/// with or without its `@` (a ZFS snapshot's folder drops what came
/// before the `@`).
fn time_in_name(name: &str) -> Option<u64> {
    name.match_indices("GMT-")
        .find_map(|(i, _)| parse_gmt(&name[i..]))
}

/// snapper's `<date>YYYY-MM-DD HH:MM:SS</date>` (UTC).
fn snapper_date(info: &str) -> Option<u64> {
    let start = info.find("<date>")? + "<date>".len();
    let date = info.get(start..start + 19)?.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let digits = &date[from..from + len];
        digits.iter().all(u8::is_ascii_digit).then_some(())?;
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    if date[4] != b'-' || date[7] != b'-' || date[10] != b' ' || date[13] != b':' {
        return None;
    }
    datetime(
        num(0, 4)?,
        num(5, 2)?,
        num(8, 2)?,
        num(11, 2)?,
        num(14, 2)?,
        num(17, 2)?,
    )
}

fn datetime(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64) -> Option<u64> {
    let valid = (1..=12).contains(&mo)
        && (1..=31).contains(&d)
        && (0..24).contains(&h)
        && (0..60).contains(&mi)
        && (0..60).contains(&s);
    valid.then_some(())?;
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s;
    Some(filetime_from_unix(secs, 0))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard
/// Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = parse_token("@GMT-2026.11.29-22.05.09").unwrap();
        assert_eq!(token(t), "@GMT-2026.11.29-22.05.09");
        assert_eq!(filetime_from_unix(1_795_989_909, 0), t);
        assert_eq!(token(filetime_from_unix(0, 0)), "@GMT-1970.01.01-00.00.00");
        assert_eq!(
            token(filetime_from_unix(951_782_400, 0)),
            "@GMT-2000.02.29-00.00.00"
        );
        for bad in [
            "@GMT-2026.11.29-22.05",
            "GMT-2026.11.29-22.05.09",
            "@GMT-2026.13.29-22.05.09",
            "@GMT-2026.11.29-24.05.09",
            "@GMT-2026.11.29-22.05.09x",
            "@GMT-2026/11/29-22.05.09",
        ] {
            assert_eq!(parse_token(bad), None, "{bad}");
        }
    }

    #[test]
    fn folders_are_timed_by_name_or_by_snapper() {
        assert_eq!(
            time_in_name("daily-GMT-2026.11.29-22.05.09"),
            parse_token("@GMT-2026.11.29-22.05.09")
        );
        assert_eq!(time_in_name("weekly"), None);
        let info = "<?xml version=\"1.0\"?>\n<snapshot>\n  <type>single</type>\n  \
                    <num>3</num>\n  <date>2026-11-29 22:05:09</date>\n</snapshot>\n";
        assert_eq!(snapper_date(info), parse_token("@GMT-2026.11.29-22.05.09"));
        assert_eq!(snapper_date("<date>2026-11-29</date>"), None);
    }

    #[test]
    fn snapshots_are_found_newest_first_and_served() {
        let tmp = tempfile::tempdir().unwrap();
        let share = tmp.path().join("share");
        let snaps = tmp.path().join("snaps");
        for name in [
            "@GMT-2026.11.28-10.00.00",
            "@GMT-2026.11.29-10.00.00",
            "junk",
        ] {
            std::fs::create_dir_all(snaps.join(name)).unwrap();
        }
        std::fs::write(snaps.join("@GMT-2026.11.29-10.00.00/f"), b"then").unwrap();
        std::fs::create_dir(&share).unwrap();
        let s = Snapshots::new(&share, Source::Dir(snaps.clone()));
        let times: Vec<String> = s.times().unwrap().into_iter().map(token).collect();
        assert_eq!(
            times,
            ["@GMT-2026.11.29-10.00.00", "@GMT-2026.11.28-10.00.00"]
        );
        let t = parse_token("@GMT-2026.11.29-10.00.00").unwrap();
        let vfs = s.at(t).unwrap().unwrap();
        let who = crate::Identity::Server;
        let o = vfs
            .open(&crate::OpenRequest::look(&who, "f", crate::Kind::Any))
            .unwrap();
        let mut buf = [0; 8];
        assert_eq!(vfs.read(&o.handle, 0, &mut buf).unwrap(), 4);
        assert!(s.at(t + TICKS_PER_SEC).unwrap().is_none());
        assert_eq!(s.folder_in_share(), None);
        let btrfs = Snapshots::new(&share, Source::Btrfs);
        assert_eq!(btrfs.folder_in_share().as_deref(), Some(".snapshots"));
        assert!(btrfs.times().unwrap().is_empty());
    }
}
