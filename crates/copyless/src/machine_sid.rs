//! The server's machine SID, S-1-5-21-a-b-c: made at random on the first
//! start and kept in `<state_dir>/machine-sid`, so that each user's SID
//! (the machine SID and a RID) stays the same across restarts and a
//! stored ACL naming a user keeps meaning that user.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub const FILE_NAME: &str = "machine-sid";

/// The machine SID's three sub-authorities after S-1-5-21.
pub fn load_or_create(state_dir: &Path) -> Result<[u32; 3], String> {
    let path = state_dir.join(FILE_NAME);
    match fs::read_to_string(&path) {
        Ok(text) => parse(text.trim()).ok_or_else(|| {
            format!(
                "{}: not a machine SID (S-1-5-21-a-b-c): {:?}",
                path.display(),
                text.trim()
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let mut random = [0u8; 12];
            getrandom::fill(&mut random).map_err(|e| format!("random: {e}"))?;
            let sid = [0, 4, 8]
                .map(|i| u32::from_le_bytes(random[i..i + 4].try_into().expect("4 bytes")));
            write(state_dir, &sid).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(sid)
        }
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The machine SID kept in `state_dir`, if a server made one there.
pub fn load(state_dir: &Path) -> Option<[u32; 3]> {
    parse(fs::read_to_string(state_dir.join(FILE_NAME)).ok()?.trim())
}

/// A user's own SID, as the server's tokens carry it.
pub fn user_sid(machine: [u32; 3], uid: u32) -> String {
    let rid = copyless_core::security::user_rid(uid);
    format!(
        "S-1-5-21-{}-{}-{}-{rid}",
        machine[0], machine[1], machine[2]
    )
}

fn parse(text: &str) -> Option<[u32; 3]> {
    let rest = text.strip_prefix("S-1-5-21-")?;
    let mut parts = rest.split('-').map(|p| p.parse::<u32>().ok());
    let sid = [parts.next()??, parts.next()??, parts.next()??];
    parts.next().is_none().then_some(sid)
}

/// Written whole or not at all: a temporary file renamed into place.
fn write(state_dir: &Path, sid: &[u32; 3]) -> io::Result<()> {
    fs::create_dir_all(state_dir)?;
    let tmp = state_dir.join(format!(".{FILE_NAME}.tmp.{}", std::process::id()));
    let mut file = fs::File::create(&tmp)?;
    writeln!(file, "S-1-5-21-{}-{}-{}", sid[0], sid[1], sid[2])?;
    file.sync_all()?;
    fs::rename(&tmp, state_dir.join(FILE_NAME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_then_kept() {
        let dir = std::env::temp_dir().join(format!("copyless-sid-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let first = load_or_create(&dir).unwrap();
        assert_eq!(load_or_create(&dir).unwrap(), first);
        let text = fs::read_to_string(dir.join(FILE_NAME)).unwrap();
        assert_eq!(parse(text.trim()), Some(first));
        assert_eq!(load(&dir), Some(first));
        assert_eq!(
            user_sid([1, 2, 3], 1001),
            "S-1-5-21-1-2-3-3002",
            "the RID is the uid's, as Samba maps it"
        );
        fs::write(dir.join(FILE_NAME), "S-1-5-21-1-2\n").unwrap();
        assert!(load_or_create(&dir)
            .unwrap_err()
            .contains("not a machine SID"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parses_only_machine_sids() {
        assert_eq!(parse("S-1-5-21-1-2-3"), Some([1, 2, 3]));
        for bad in [
            "S-1-5-21-1-2",
            "S-1-5-21-1-2-3-4",
            "S-1-5-32-1-2-3",
            "S-1-5-21-a-2-3",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
