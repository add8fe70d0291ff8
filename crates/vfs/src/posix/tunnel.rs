//! Name tunneling, as NTFS does it: a file made by a short name in a
//! folder where, moments before, a long-named file with that short name
//! was deleted or renamed away takes the long name back. Programs that
//! save by writing a new file over a deleted one and know only its short
//! name (and Samba's smbtorture `smb2.mangle`) keep the long name.
//!
//! Kept in memory for [`TUNNEL_PERIOD`], for at most [`MAX_GONE`] names.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::case_cache::DirKey;
use crate::shortname;

/// How long NTFS keeps a gone name (its default, 15 seconds).
const TUNNEL_PERIOD: Duration = Duration::from_secs(15);
/// The most gone names kept; the oldest go first.
const MAX_GONE: usize = 256;

#[derive(Default)]
pub struct Tunnel {
    gone: Mutex<VecDeque<Gone>>,
}

struct Gone {
    dir: DirKey,
    short: String,
    long: String,
    at: Instant,
}

impl Tunnel {
    /// `name` left the folder `dir`: remembered when it has a short name
    /// of its own.
    pub fn note_gone(&self, dir: DirKey, name: &str) {
        let short = shortname::short_name(name);
        if !shortname::is_hashed(&short) || short == name.to_uppercase() {
            return;
        }
        let mut gone = self.gone.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        gone.retain(|g| {
            now.duration_since(g.at) < TUNNEL_PERIOD && !(g.dir == dir && g.short == short)
        });
        if gone.len() == MAX_GONE {
            gone.pop_front();
        }
        gone.push_back(Gone {
            dir,
            short,
            long: name.to_owned(),
            at: now,
        });
    }

    /// The long name a new entry called `name` in `dir` takes back, if it
    /// is the short name of one that left moments ago. Taken once.
    pub fn take_long_name(&self, dir: DirKey, name: &str) -> Option<String> {
        if !shortname::is_hashed(name) {
            return None;
        }
        let mut gone = self.gone.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let i = gone.iter().position(|g| {
            g.dir == dir
                && now.duration_since(g.at) < TUNNEL_PERIOD
                && g.short.eq_ignore_ascii_case(name)
        })?;
        gone.remove(i).map(|g| g.long)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_name_takes_back_its_gone_long_name_once() {
        let t = Tunnel::default();
        let long = "AgEtxb5Vfj.n7y";
        let short = shortname::short_name(long);
        t.note_gone((1, 2), long);
        assert_eq!(t.take_long_name((1, 3), &short), None, "another folder");
        assert_eq!(t.take_long_name((1, 2), "OTHER~123.TXT"), None);
        assert_eq!(
            t.take_long_name((1, 2), &short.to_lowercase()).as_deref(),
            Some(long)
        );
        assert_eq!(t.take_long_name((1, 2), &short), None, "taken once");
        // An 8.3 name is its own short name: nothing to take back.
        t.note_gone((1, 2), "README.TXT");
        assert!(t.gone.lock().unwrap().is_empty());
    }

    #[test]
    fn keeps_a_bounded_number() {
        let t = Tunnel::default();
        for i in 0..MAX_GONE + 10 {
            t.note_gone((1, 2), &format!("a long file name {i}.text"));
        }
        assert_eq!(t.gone.lock().unwrap().len(), MAX_GONE);
    }
}
