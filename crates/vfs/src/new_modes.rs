//! The Unix modes new files and folders of a share get: a share's
//! `create_mask`, `directory_mask`, `force_create_mode`,
//! `force_directory_mode`, `inherit_permissions` and `inherit_acls`, with
//! Samba's meaning, so that a folder a family or an office shares stays
//! shared (a file one member saves there is writable by the others) and
//! an smb.conf's settings carry over unchanged. The server's umask does
//! not apply, as it does not in Samba.

/// How a share makes the modes of what it creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewModes {
    /// ANDed with 0666 for a new file (Samba's `create mask`).
    pub create_mask: u32,
    /// ANDed with 0777 for a new folder (Samba's `directory mask`).
    pub directory_mask: u32,
    /// ORed in after `create_mask` (Samba's `force create mode`).
    pub force_create_mode: u32,
    /// ORed in after `directory_mask` (Samba's `force directory mode`).
    pub force_directory_mode: u32,
    /// A new file takes the read and write bits of its folder, a new
    /// folder the folder's whole mode (setgid and sticky included, never
    /// setuid), instead of the masks (Samba's `inherit permissions`).
    pub inherit_permissions: bool,
    /// Where the folder has a POSIX default ACL, the new object is
    /// created with every permission bit, so that the ACL it inherits is
    /// not narrowed by the mode (Samba's `inherit acls`).
    pub inherit_acls: bool,
}

impl Default for NewModes {
    /// Samba's defaults: files 0644 and folders 0755, whatever the umask.
    fn default() -> NewModes {
        NewModes {
            create_mask: 0o744,
            directory_mask: 0o755,
            force_create_mode: 0,
            force_directory_mode: 0,
            inherit_permissions: false,
            inherit_acls: false,
        }
    }
}

/// Setuid is never given to what a client creates.
const SETUID: u32 = 0o4000;
const ALL_PERMISSIONS: u32 = 0o7777;

impl NewModes {
    /// The mode a new folder (`is_dir`) or file gets in a folder of mode
    /// `parent` (only looked at with `inherit_permissions`).
    pub fn mode(&self, is_dir: bool, parent: u32) -> u32 {
        let inherited = self
            .inherit_permissions
            .then_some(parent & ALL_PERMISSIONS & !SETUID);
        let mode = match (is_dir, inherited) {
            // An inherited folder mode is made writable by the owner, as
            // Samba does (Windows lets its creator add to a read-only
            // folder); a mask may still take that away.
            (true, Some(parent)) => parent | 0o200,
            (true, None) => (0o777 & self.directory_mask) | self.force_directory_mode,
            (false, Some(parent)) => parent & 0o666,
            (false, None) => (0o666 & self.create_mask) | self.force_create_mode,
        };
        mode & ALL_PERMISSIONS & !SETUID
    }

    /// Whether the mode depends on the folder's.
    pub fn needs_parent(&self) -> bool {
        self.inherit_permissions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_samba_s() {
        let m = NewModes::default();
        assert_eq!(m.mode(false, 0o777), 0o644);
        assert_eq!(m.mode(true, 0o777), 0o755);
    }

    #[test]
    fn masks_narrow_and_forced_bits_widen() {
        let m = NewModes {
            create_mask: 0o770,
            directory_mask: 0o770,
            force_create_mode: 0o660,
            force_directory_mode: 0o2770,
            ..NewModes::default()
        };
        assert_eq!(m.mode(false, 0), 0o660);
        assert_eq!(m.mode(true, 0), 0o2770);
        let narrow = NewModes {
            create_mask: 0o600,
            directory_mask: 0o500,
            ..NewModes::default()
        };
        assert_eq!(narrow.mode(false, 0), 0o600);
        assert_eq!(narrow.mode(true, 0), 0o500);
    }

    #[test]
    fn inherited_modes_follow_the_folder_but_never_setuid() {
        let m = NewModes {
            inherit_permissions: true,
            // Ignored when inheriting, as in Samba.
            create_mask: 0o600,
            ..NewModes::default()
        };
        assert_eq!(m.mode(false, 0o2770), 0o660);
        assert_eq!(m.mode(true, 0o2770), 0o2770);
        assert_eq!(m.mode(false, 0o1777), 0o666);
        assert_eq!(m.mode(true, 0o1777), 0o1777);
        assert_eq!(m.mode(true, 0o4755), 0o755);
        assert_eq!(m.mode(true, 0o555), 0o755);
        assert!(m.needs_parent());
        assert!(!NewModes::default().needs_parent());
    }

    #[test]
    fn forced_setuid_is_dropped() {
        let m = NewModes {
            force_create_mode: 0o4755,
            ..NewModes::default()
        };
        assert_eq!(m.mode(false, 0), 0o755);
    }
}
