//! Behaviour of the POSIX backend on a real (temporary) directory tree.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use tempfile::TempDir;

use super::*;

struct Share {
    // Held for its Drop, which removes the tree.
    _tmp: TempDir,
    root: PathBuf,
    outside: PathBuf,
    vfs: PosixVfs,
}

fn share() -> Share {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("share");
    let outside = tmp.path().join("outside");
    fs::create_dir(&root).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret"), b"outside").unwrap();
    let vfs = PosixVfs::new(&root).unwrap();
    Share {
        _tmp: tmp,
        root,
        outside,
        vfs,
    }
}

fn req(path: &str, disposition: Disposition, kind: Kind) -> OpenRequest<'_> {
    OpenRequest {
        who: &Identity::Server,
        path,
        disposition,
        kind,
        read: true,
        write: true,
        attributes: 0,
        allocation_size: 0,
        unlink_asked: false,
    }
}

fn open(vfs: &PosixVfs, path: &str) -> VfsResult<Opened> {
    vfs.open(&req(path, Disposition::Open, Kind::Any))
}

fn create_file(vfs: &PosixVfs, path: &str, data: &[u8]) -> Opened {
    let o = vfs
        .open(&req(path, Disposition::Create, Kind::NonDirectory))
        .unwrap();
    vfs.write(&o.handle, 0, data).unwrap();
    o
}

fn create_dir(vfs: &PosixVfs, path: &str) -> Opened {
    vfs.open(&req(path, Disposition::Create, Kind::Directory))
        .unwrap()
}

fn read_all(vfs: &PosixVfs, h: &FileHandle) -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let n = vfs.read(h, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn disk_names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn case_insensitive_open_returns_real_path() {
    let s = share();
    create_dir(&s.vfs, "dir");
    create_file(&s.vfs, "dir/file.txt", b"hello");
    let o = open(&s.vfs, "DIR/File.TXT").unwrap();
    assert_eq!(o.path, "dir/file.txt");
    assert_eq!(o.action, CreateAction::Opened);
    assert!(!o.stat.is_dir);
    assert_eq!(read_all(&s.vfs, &o.handle), b"hello");
    assert_eq!(
        s.vfs.resolve(&Identity::Server, "Dir/FILE.txt").unwrap(),
        "dir/file.txt"
    );
    assert_eq!(s.vfs.resolve(&Identity::Server, "").unwrap(), "");
}

#[test]
fn create_keeps_case() {
    let s = share();
    let o = create_file(&s.vfs, "MixedCase.Txt", b"");
    assert_eq!(o.path, "MixedCase.Txt");
    assert_eq!(o.action, CreateAction::Created);
    let d = create_dir(&s.vfs, "SubDir");
    assert!(d.stat.is_dir);
    assert_eq!(disk_names(&s.root), vec!["MixedCase.Txt", "SubDir"]);
    // A new name under a directory given in another case lands in it.
    let o = create_file(&s.vfs, "SUBDIR/Inner.Bin", b"");
    assert_eq!(o.path, "SubDir/Inner.Bin");
    assert_eq!(disk_names(&s.root.join("SubDir")), vec!["Inner.Bin"]);
}

#[test]
fn create_on_existing_name_collides_in_any_case() {
    let s = share();
    create_file(&s.vfs, "a.txt", b"x");
    for name in ["a.txt", "A.TXT"] {
        let r = s.vfs.open(&req(name, Disposition::Create, Kind::Any));
        assert!(matches!(r, Err(VfsError::Collision)), "{name}: {r:?}");
    }
    create_dir(&s.vfs, "d");
    let r = s.vfs.open(&req("D", Disposition::Create, Kind::Directory));
    assert!(matches!(r, Err(VfsError::Collision)));
    assert_eq!(disk_names(&s.root), vec!["a.txt", "d"]);
}

#[test]
fn missing_names_and_paths() {
    let s = share();
    create_file(&s.vfs, "file", b"");
    assert!(matches!(
        open(&s.vfs, "nothing"),
        Err(VfsError::NameNotFound)
    ));
    assert!(matches!(
        s.vfs
            .open(&req("nothing", Disposition::Overwrite, Kind::Any)),
        Err(VfsError::NameNotFound)
    ));
    assert!(matches!(
        open(&s.vfs, "nodir/x"),
        Err(VfsError::PathNotFound)
    ));
    assert!(matches!(open(&s.vfs, "a/b/c"), Err(VfsError::PathNotFound)));
    // A file where a directory is expected on the way.
    assert!(matches!(
        open(&s.vfs, "file/x"),
        Err(VfsError::PathNotFound)
    ));
    assert!(matches!(
        s.vfs.open(&req("nodir/x", Disposition::Create, Kind::Any)),
        Err(VfsError::PathNotFound)
    ));
    assert!(matches!(
        s.vfs.resolve(&Identity::Server, "none"),
        Err(VfsError::NameNotFound)
    ));
    assert!(matches!(
        s.vfs.resolve(&Identity::Server, "none/x"),
        Err(VfsError::PathNotFound)
    ));
}

#[test]
fn invalid_names_are_refused() {
    let s = share();
    for bad in [
        "../outside/secret",
        "a/../b",
        "./x",
        "a//b",
        "/etc/passwd",
        "x\0y",
    ] {
        let r = open(&s.vfs, bad);
        assert!(matches!(r, Err(VfsError::InvalidName)), "{bad:?}: {r:?}");
    }
    let long = "x".repeat(300);
    let r = s.vfs.open(&req(&long, Disposition::Create, Kind::Any));
    assert!(matches!(r, Err(VfsError::InvalidName)), "{r:?}");
}

#[test]
fn symlinks_leaving_the_share_are_not_followed() {
    let s = share();
    fs::create_dir(s.root.join("sub")).unwrap();
    symlink("/etc/passwd", s.root.join("passwd")).unwrap();
    symlink("../outside/secret", s.root.join("up")).unwrap();
    symlink("../../outside/secret", s.root.join("sub/up2")).unwrap();
    symlink(&s.outside, s.root.join("outdir")).unwrap();
    symlink("../outside", s.root.join("outdir2")).unwrap();
    for path in [
        "passwd",
        "PASSWD",
        "up",
        "sub/up2",
        "outdir",
        "outdir/secret",
        "outdir2/secret",
        "OUTDIR2/Secret",
    ] {
        for disposition in [
            Disposition::Open,
            Disposition::OpenIf,
            Disposition::OverwriteIf,
        ] {
            let r = s.vfs.open(&req(path, disposition, Kind::Any));
            assert!(
                matches!(
                    r,
                    Err(VfsError::AccessDenied | VfsError::NameNotFound | VfsError::PathNotFound)
                ),
                "{path} {disposition:?}: {r:?}"
            );
        }
    }
    // Nothing outside was touched by the overwrite attempts.
    assert_eq!(fs::read(s.outside.join("secret")).unwrap(), b"outside");
    assert!(matches!(
        s.vfs
            .open(&req("outdir2/new", Disposition::Create, Kind::Any)),
        Err(VfsError::AccessDenied)
    ));
    assert_eq!(disk_names(&s.outside), vec!["secret"]);
}

#[test]
fn symlinks_inside_the_share_are_followed() {
    let s = share();
    create_file(&s.vfs, "target.txt", b"inside");
    create_dir(&s.vfs, "sub");
    create_dir(&s.vfs, "realdir");
    create_file(&s.vfs, "realdir/f", b"in dir");
    symlink("target.txt", s.root.join("link")).unwrap();
    symlink("../target.txt", s.root.join("sub/link2")).unwrap();
    symlink("realdir", s.root.join("dirlink")).unwrap();

    let o = open(&s.vfs, "LINK").unwrap();
    assert_eq!(o.path, "link");
    assert_eq!(read_all(&s.vfs, &o.handle), b"inside");
    let o = open(&s.vfs, "sub/link2").unwrap();
    assert_eq!(read_all(&s.vfs, &o.handle), b"inside");
    let o = open(&s.vfs, "dirlink").unwrap();
    assert!(o.stat.is_dir && o.handle.is_dir);
    let o = open(&s.vfs, "dirlink/F").unwrap();
    assert_eq!(read_all(&s.vfs, &o.handle), b"in dir");
}

#[test]
fn dos_attributes_survive_a_restart() {
    let s = share();
    let o = s
        .vfs
        .open(&OpenRequest {
            who: &Identity::Server,
            attributes: attr::HIDDEN | attr::READONLY | attr::DIRECTORY,
            ..req("f", Disposition::Create, Kind::NonDirectory)
        })
        .unwrap();
    let want = attr::HIDDEN | attr::READONLY | attr::ARCHIVE;
    assert_eq!(o.stat.attributes, want);
    // READONLY is a stored bit; the file stays writable for us.
    s.vfs.write(&o.handle, 0, b"data").unwrap();
    let d = s
        .vfs
        .open(&OpenRequest {
            who: &Identity::Server,
            attributes: attr::SYSTEM,
            ..req("d", Disposition::Create, Kind::Directory)
        })
        .unwrap();
    assert_eq!(d.stat.attributes, attr::SYSTEM | attr::DIRECTORY);
    let plain = create_dir(&s.vfs, "plain");
    assert_eq!(plain.stat.attributes, attr::DIRECTORY);
    drop((o, d, plain));

    let root = s.root.clone();
    drop(s.vfs);
    let vfs = PosixVfs::new(&root).unwrap();
    assert_eq!(open(&vfs, "F").unwrap().stat.attributes, want);
    let d = open(&vfs, "D").unwrap();
    assert_eq!(d.stat.attributes, attr::SYSTEM | attr::DIRECTORY);
    vfs.set_attributes(&d.handle, attr::HIDDEN | attr::DIRECTORY | attr::NORMAL)
        .unwrap();
    drop(vfs);
    let vfs = PosixVfs::new(&root).unwrap();
    assert_eq!(
        open(&vfs, "d").unwrap().stat.attributes,
        attr::HIDDEN | attr::DIRECTORY
    );
    // Listings report the same bits.
    let r = open(&vfs, "").unwrap();
    let list = vfs.read_dir(&r.handle).unwrap();
    let f = list.iter().find(|e| e.name == "f").unwrap();
    assert_eq!(f.stat.attributes, want);
    assert_eq!(f.stat.size, 4);
}

#[test]
fn file_without_stored_attributes_is_normal_even_if_dotted() {
    let s = share();
    fs::write(s.root.join(".profile"), b"x").unwrap();
    let o = open(&s.vfs, ".profile").unwrap();
    assert_eq!(o.stat.attributes, attr::NORMAL);
}

#[test]
fn overwrite_truncates_and_resets_attributes() {
    let s = share();
    let o = s
        .vfs
        .open(&OpenRequest {
            who: &Identity::Server,
            attributes: attr::HIDDEN,
            ..req("f", Disposition::Create, Kind::Any)
        })
        .unwrap();
    s.vfs.write(&o.handle, 0, b"0123456789").unwrap();
    drop(o);
    for (disposition, action) in [
        (Disposition::Overwrite, CreateAction::Overwritten),
        (Disposition::OverwriteIf, CreateAction::Overwritten),
        (Disposition::Supersede, CreateAction::Superseded),
    ] {
        let o = s
            .vfs
            .open(&OpenRequest {
                who: &Identity::Server,
                attributes: attr::SYSTEM,
                ..req("F", disposition, Kind::Any)
            })
            .unwrap();
        assert_eq!(o.action, action);
        assert_eq!(o.path, "f");
        assert_eq!(o.stat.size, 0);
        assert_eq!(o.stat.attributes, attr::SYSTEM | attr::ARCHIVE);
        s.vfs.write(&o.handle, 0, b"abc").unwrap();
    }
    let o = s
        .vfs
        .open(&req("new", Disposition::OverwriteIf, Kind::Any))
        .unwrap();
    assert_eq!(o.action, CreateAction::Created);
    assert_eq!(o.stat.attributes, attr::ARCHIVE);
    let o = s
        .vfs
        .open(&req("F", Disposition::OpenIf, Kind::Any))
        .unwrap();
    assert_eq!(o.action, CreateAction::Opened);
    assert_eq!(o.stat.size, 3);
}

#[test]
fn kinds_are_checked() {
    let s = share();
    create_file(&s.vfs, "f", b"");
    create_dir(&s.vfs, "d");
    let r = s.vfs.open(&req("D", Disposition::Open, Kind::NonDirectory));
    assert!(matches!(r, Err(VfsError::IsADirectory)), "{r:?}");
    let r = s.vfs.open(&req("f", Disposition::Open, Kind::Directory));
    assert!(matches!(r, Err(VfsError::NotADirectory)), "{r:?}");
    let r = s.vfs.open(&req("d", Disposition::OverwriteIf, Kind::Any));
    assert!(matches!(r, Err(VfsError::IsADirectory)), "{r:?}");
    // Kind::Any opens a directory as a directory even when asking to write.
    let o = s.vfs.open(&req("d", Disposition::Open, Kind::Any)).unwrap();
    assert!(o.handle.is_dir && o.stat.is_dir);
    // The root itself.
    let o = open(&s.vfs, "").unwrap();
    assert!(o.handle.is_dir);
    assert_eq!(o.path, "");
    assert!(matches!(
        s.vfs.open(&req("", Disposition::Create, Kind::Directory)),
        Err(VfsError::Collision)
    ));
}

#[test]
fn special_files_are_not_served() {
    let s = share();
    let status = std::process::Command::new("mkfifo")
        .arg(s.root.join("fifo"))
        .status();
    if !status.is_ok_and(|st| st.success()) {
        return;
    }
    // Must return (not block) and refuse.
    let r = open(&s.vfs, "fifo");
    assert!(matches!(r, Err(VfsError::AccessDenied)), "{r:?}");
}

#[test]
fn read_write_and_sizes() {
    let s = share();
    let o = create_file(&s.vfs, "f", b"hello world");
    let mut buf = [0u8; 5];
    assert_eq!(s.vfs.read(&o.handle, 6, &mut buf).unwrap(), 5);
    assert_eq!(&buf, b"world");
    // Short only at end of file.
    assert_eq!(s.vfs.read(&o.handle, 9, &mut buf).unwrap(), 2);
    assert_eq!(s.vfs.read(&o.handle, 100, &mut buf).unwrap(), 0);
    s.vfs.write(&o.handle, 20, b"!").unwrap();
    assert_eq!(s.vfs.stat(&o.handle).unwrap().size, 21);
    s.vfs.set_len(&o.handle, 5).unwrap();
    assert_eq!(read_all(&s.vfs, &o.handle), b"hello");
    s.vfs.flush(&o.handle).unwrap();
    s.vfs.set_allocation(&o.handle, 1 << 20).unwrap();
    let st = s.vfs.stat(&o.handle).unwrap();
    assert_eq!(st.size, 5);
    assert!(st.alloc_size >= 1 << 20, "alloc {}", st.alloc_size);
    // Smaller than what is allocated: nothing happens.
    s.vfs.set_allocation(&o.handle, 1).unwrap();
    assert_eq!(s.vfs.stat(&o.handle).unwrap().size, 5);

    let o = s
        .vfs
        .open(&OpenRequest {
            who: &Identity::Server,
            allocation_size: 65536,
            ..req("pre", Disposition::Create, Kind::Any)
        })
        .unwrap();
    assert_eq!(o.stat.size, 0);
    assert!(o.stat.alloc_size >= 65536);
    let d = create_dir(&s.vfs, "d");
    s.vfs.flush(&d.handle).unwrap();
}

#[test]
fn rename_changing_only_case() {
    let s = share();
    create_file(&s.vfs, "foo.txt", b"x");
    assert_eq!(
        s.vfs
            .rename(&Identity::Server, "foo.txt", "FOO.TXT", false)
            .unwrap(),
        "FOO.TXT"
    );
    assert_eq!(disk_names(&s.root), vec!["FOO.TXT"]);
    assert_eq!(open(&s.vfs, "foo.txt").unwrap().path, "FOO.TXT");
    create_dir(&s.vfs, "Dir");
    assert_eq!(
        s.vfs
            .rename(&Identity::Server, "Dir", "dir", false)
            .unwrap(),
        "dir"
    );
    assert_eq!(disk_names(&s.root), vec!["FOO.TXT", "dir"]);
    // To exactly the same name: nothing to do, and no collision.
    assert_eq!(
        s.vfs
            .rename(&Identity::Server, "dir", "dir", false)
            .unwrap(),
        "dir"
    );
}

#[test]
fn rename_onto_existing() {
    let s = share();
    create_file(&s.vfs, "a", b"from a");
    create_file(&s.vfs, "b", b"from b");
    create_dir(&s.vfs, "dir");
    let r = s.vfs.rename(&Identity::Server, "a", "B", false);
    assert!(matches!(r, Err(VfsError::Collision)), "{r:?}");
    let r = s.vfs.rename(&Identity::Server, "a", "DIR", true);
    assert!(matches!(r, Err(VfsError::AccessDenied)), "{r:?}");
    let r = s.vfs.rename(&Identity::Server, "a", "DIR", false);
    assert!(matches!(r, Err(VfsError::Collision)), "{r:?}");
    assert_eq!(
        s.vfs.rename(&Identity::Server, "a", "B", true).unwrap(),
        "B"
    );
    assert_eq!(disk_names(&s.root), vec!["B", "dir"]);
    assert_eq!(fs::read(s.root.join("B")).unwrap(), b"from a");
    assert!(matches!(open(&s.vfs, "a"), Err(VfsError::NameNotFound)));
    assert_eq!(open(&s.vfs, "b").unwrap().path, "B");
}

#[test]
fn rename_across_directories() {
    let s = share();
    create_dir(&s.vfs, "Src");
    create_dir(&s.vfs, "Dst");
    create_file(&s.vfs, "Src/file", b"x");
    // The target's parent is resolved case-insensitively.
    assert_eq!(
        s.vfs
            .rename(&Identity::Server, "Src/file", "dst/New Name", false)
            .unwrap(),
        "Dst/New Name"
    );
    assert_eq!(disk_names(&s.root.join("Dst")), vec!["New Name"]);
    assert!(disk_names(&s.root.join("Src")).is_empty());
    assert!(matches!(
        open(&s.vfs, "src/FILE"),
        Err(VfsError::NameNotFound)
    ));
    assert_eq!(open(&s.vfs, "DST/new name").unwrap().path, "Dst/New Name");
    let r = s
        .vfs
        .rename(&Identity::Server, "Dst/New Name", "nowhere/x", false);
    assert!(matches!(r, Err(VfsError::PathNotFound)), "{r:?}");
    let r = s.vfs.rename(&Identity::Server, "Dst/missing", "x", false);
    assert!(matches!(r, Err(VfsError::NameNotFound)), "{r:?}");
    let r = s.vfs.rename(&Identity::Server, "", "x", false);
    assert!(matches!(r, Err(VfsError::AccessDenied)), "{r:?}");
    // Within one folder, whose names are known case-insensitively by
    // now: the old name is gone from what is known, the new one found.
    assert_eq!(
        s.vfs
            .rename(&Identity::Server, "Dst/New Name", "Dst/Other", false)
            .unwrap(),
        "Dst/Other"
    );
    assert_eq!(disk_names(&s.root.join("Dst")), vec!["Other"]);
    assert_eq!(open(&s.vfs, "dst/OTHER").unwrap().path, "Dst/Other");
    assert!(matches!(
        open(&s.vfs, "dst/NEW NAME"),
        Err(VfsError::NameNotFound)
    ));
}

#[test]
fn unlink_files_and_directories() {
    let s = share();
    create_dir(&s.vfs, "d");
    create_file(&s.vfs, "d/f", b"");
    let r = s.vfs.unlink(&Identity::Server, "d", true);
    assert!(matches!(r, Err(VfsError::NotEmpty)), "{r:?}");
    let r = s.vfs.unlink(&Identity::Server, "d", false);
    assert!(matches!(r, Err(VfsError::IsADirectory)), "{r:?}");
    s.vfs.unlink(&Identity::Server, "D/F", false).unwrap();
    assert!(matches!(open(&s.vfs, "d/f"), Err(VfsError::NameNotFound)));
    s.vfs.unlink(&Identity::Server, "d", true).unwrap();
    assert!(matches!(open(&s.vfs, "d"), Err(VfsError::NameNotFound)));
    assert!(matches!(
        s.vfs.unlink(&Identity::Server, "d", true),
        Err(VfsError::NameNotFound)
    ));
    assert!(disk_names(&s.root).is_empty());
    // Removing a symlink removes the link, never its target.
    create_dir(&s.vfs, "real");
    symlink("real", s.root.join("link")).unwrap();
    s.vfs.unlink(&Identity::Server, "link", true).unwrap();
    assert_eq!(disk_names(&s.root), vec!["real"]);
}

#[test]
fn read_dir_is_sorted_and_complete() {
    let s = share();
    for name in ["b", "a", "C"] {
        create_file(&s.vfs, name, b"12");
    }
    create_dir(&s.vfs, "d");
    symlink("/etc/passwd", s.root.join("escape")).unwrap();
    symlink("a", s.root.join("to_a")).unwrap();
    let r = open(&s.vfs, "").unwrap();
    let list = s.vfs.read_dir(&r.handle).unwrap();
    let names: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, vec!["C", "a", "b", "d", "escape", "to_a"]);
    let by = |n: &str| &list.iter().find(|e| e.name == n).unwrap().stat;
    assert!(by("d").is_dir);
    assert_eq!(by("d").attributes, attr::DIRECTORY);
    assert_eq!(by("a").size, 2);
    assert_eq!(by("a").attributes, attr::ARCHIVE);
    // Followed inside the share...
    assert_eq!(by("to_a").size, 2);
    assert_eq!(by("to_a").ino, by("a").ino);
    // ...but an escaping link is described as the link itself.
    let passwd_len = fs::metadata("/etc/passwd").map(|m| m.len()).unwrap_or(0);
    assert_eq!(by("escape").size, "/etc/passwd".len() as u64);
    assert_ne!(by("escape").size, passwd_len);
    // A second listing of the same handle is complete too.
    assert_eq!(s.vfs.read_dir(&r.handle).unwrap().len(), 6);
    assert!(!s.vfs.is_empty_dir(&r.handle).unwrap());
    let d = open(&s.vfs, "d").unwrap();
    assert!(s.vfs.is_empty_dir(&d.handle).unwrap());
    let f = open(&s.vfs, "a").unwrap();
    assert!(matches!(
        s.vfs.read_dir(&f.handle),
        Err(VfsError::NotADirectory)
    ));
}

#[test]
fn times_round_trip() {
    let s = share();
    let o = create_file(&s.vfs, "f", b"x");
    let before = s.vfs.stat(&o.handle).unwrap();
    assert!(before.creation_time > UNIX_EPOCH_AS_FILETIME);
    let times = SetTimes {
        creation_time: Some(125_911_584_000_000_000),
        last_access_time: Some(130_000_000_001_234_567),
        last_write_time: Some(131_000_000_007_654_321),
        change_time: Some(132_000_000_000_000_000),
    };
    s.vfs.set_times(&o.handle, &times).unwrap();
    let st = s.vfs.stat(&o.handle).unwrap();
    assert_eq!(st.creation_time, 125_911_584_000_000_000);
    assert_eq!(st.last_access_time, 130_000_000_001_234_567);
    assert_eq!(st.last_write_time, 131_000_000_007_654_321);
    // None, 0 and -1 leave times alone.
    let keep = SetTimes {
        creation_time: Some(0),
        last_access_time: Some(u64::MAX),
        last_write_time: None,
        change_time: None,
    };
    s.vfs.set_times(&o.handle, &keep).unwrap();
    let again = s.vfs.stat(&o.handle).unwrap();
    assert_eq!(again.creation_time, st.creation_time);
    assert_eq!(again.last_access_time, st.last_access_time);
    assert_eq!(again.last_write_time, st.last_write_time);
    // The creation time is stored, so it survives a restart.
    let root = s.root.clone();
    let vfs = PosixVfs::new(&root).unwrap();
    let st = open(&vfs, "F").unwrap().stat;
    assert_eq!(st.creation_time, 125_911_584_000_000_000);
}

#[test]
fn names_created_behind_our_back_are_found() {
    let s = share();
    create_dir(&s.vfs, "d");
    create_file(&s.vfs, "d/Known", b"");
    // Fill the case cache for "d".
    assert_eq!(open(&s.vfs, "d/KNOWN").unwrap().path, "d/Known");
    assert!(matches!(
        open(&s.vfs, "d/other"),
        Err(VfsError::NameNotFound)
    ));
    fs::write(s.root.join("d/Other"), b"").unwrap();
    assert_eq!(open(&s.vfs, "d/OTHER").unwrap().path, "d/Other");
    fs::rename(s.root.join("d/Other"), s.root.join("d/Third")).unwrap();
    assert!(matches!(
        open(&s.vfs, "d/other"),
        Err(VfsError::NameNotFound)
    ));
    assert_eq!(open(&s.vfs, "d/third").unwrap().path, "d/Third");
    // And our own changes keep the cache right.
    create_file(&s.vfs, "d/Mine", b"");
    assert_eq!(open(&s.vfs, "d/MINE").unwrap().path, "d/Mine");
    s.vfs.unlink(&Identity::Server, "d/mine", false).unwrap();
    assert!(matches!(
        open(&s.vfs, "d/MINE"),
        Err(VfsError::NameNotFound)
    ));
    s.vfs
        .rename(&Identity::Server, "d/Third", "d/Fourth", false)
        .unwrap();
    assert_eq!(open(&s.vfs, "d/FOURTH").unwrap().path, "d/Fourth");
    assert!(matches!(
        open(&s.vfs, "d/THIRD"),
        Err(VfsError::NameNotFound)
    ));
}

#[test]
fn concurrent_use_from_many_threads() {
    let s = share();
    create_dir(&s.vfs, "shared");
    std::thread::scope(|scope| {
        for t in 0..4 {
            let vfs = &s.vfs;
            scope.spawn(move || {
                for i in 0..50 {
                    let name = format!("shared/File-{t}-{i}");
                    create_file(vfs, &name, b"x");
                    let o = open(vfs, &name.to_uppercase()).unwrap();
                    assert_eq!(o.path, name);
                }
            });
        }
    });
    let d = open(&s.vfs, "shared").unwrap();
    assert_eq!(s.vfs.read_dir(&d.handle).unwrap().len(), 200);
}

#[test]
fn fs_stat_describes_the_filesystem() {
    let s = share();
    let st = s.vfs.fs_stat().unwrap();
    assert!(st.block_size > 0);
    assert!(st.total_blocks > 0);
    assert!(st.free_blocks >= st.avail_blocks);
    assert!(st.max_name_len >= 255);
}

/// The account every Debian system has for unprivileged work.
fn nobody() -> Identity {
    Identity::unix(65534, 65534, vec![65534])
}

fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn everything_is_done_as_the_caller() {
    let s = share();
    chmod(s.root.parent().unwrap(), 0o755);
    chmod(&s.root, 0o755);
    fs::create_dir(s.root.join("open")).unwrap();
    chmod(&s.root.join("open"), 0o777);
    fs::create_dir(s.root.join("sticky")).unwrap();
    chmod(&s.root.join("sticky"), 0o1777);
    fs::write(s.root.join("sticky/server's"), b"kept").unwrap();
    fs::write(s.root.join("private"), b"secret").unwrap();
    chmod(&s.root.join("private"), 0o600);
    let who = nobody();
    let as_nobody = |path, disposition, kind| OpenRequest {
        who: &who,
        ..req(path, disposition, kind)
    };

    if !rustix::process::geteuid().is_root() {
        // A server that cannot take on another identity does nothing
        // rather than act as itself for someone else.
        let r = s.vfs.open(&as_nobody("open", Disposition::Open, Kind::Any));
        assert!(matches!(r, Err(VfsError::AccessDenied)), "{r:?}");
        return;
    }

    // The kernel's own checks apply: mode 0600 of another owner.
    let r = s
        .vfs
        .open(&as_nobody("private", Disposition::Open, Kind::Any));
    assert!(matches!(r, Err(VfsError::AccessDenied)), "{r:?}");
    // New files belong to their creator.
    let mine = s
        .vfs
        .open(&as_nobody(
            "open/mine",
            Disposition::Create,
            Kind::NonDirectory,
        ))
        .unwrap();
    assert_eq!((mine.stat.uid, mine.stat.gid), (65534, 65534));
    // This thread acts as the server again for the server's own open...
    assert!(open(&s.vfs, "private").is_ok());
    // ...and as the opener again for the opener's handle.
    s.vfs.write(&mine.handle, 0, b"data").unwrap();
    assert_eq!(fs::read(s.root.join("open/mine")).unwrap(), b"data");
    let theirs = open(&s.vfs, "private").unwrap();
    assert_eq!(theirs.handle.who(), &Identity::Server);
    // A sticky directory keeps what others own.
    assert!(s.vfs.unlink(&who, "sticky/server's", false).is_err());
    assert!(s.root.join("sticky/server's").exists());
    s.vfs
        .open(&as_nobody(
            "sticky/own",
            Disposition::Create,
            Kind::NonDirectory,
        ))
        .unwrap();
    s.vfs.unlink(&who, "sticky/own", false).unwrap();
    assert!(!s.root.join("sticky/own").exists());
}

#[test]
fn only_who_may_unlink_may_delete() {
    let s = share();
    chmod(s.root.parent().unwrap(), 0o755);
    chmod(&s.root, 0o755);
    for (dir, mode) in [("sticky", 0o1777), ("shut", 0o755)] {
        fs::create_dir(s.root.join(dir)).unwrap();
        chmod(&s.root.join(dir), mode);
        fs::write(s.root.join(dir).join("server's"), b"kept").unwrap();
    }
    assert!(s
        .vfs
        .may_delete(&Identity::Server, "sticky/server's")
        .is_ok());
    assert!(s.vfs.may_delete(&Identity::Server, "").is_err(), "the root");
    // An open asked to tells the same on its way, and only then.
    let asked = |who, path| OpenRequest {
        unlink_asked: true,
        ..OpenRequest::look(who, path, Kind::Any)
    };
    let server = Identity::Server;
    let opened = s.vfs.open(&asked(&server, "sticky/server's")).unwrap();
    assert_eq!(opened.may_unlink, Some(true));
    assert_eq!(open(&s.vfs, "sticky/server's").unwrap().may_unlink, None);
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let who = nobody();
    for path in ["sticky/server's", "shut/server's"] {
        let r = s.vfs.may_delete(&who, path);
        assert!(matches!(r, Err(VfsError::AccessDenied)), "{path}: {r:?}");
        let opened = s.vfs.open(&asked(&who, path)).unwrap();
        assert_eq!(opened.may_unlink, Some(false), "{path}");
    }
    let made = s
        .vfs
        .open(&OpenRequest {
            who: &who,
            unlink_asked: true,
            ..req("sticky/own", Disposition::Create, Kind::NonDirectory)
        })
        .unwrap();
    assert_eq!(made.may_unlink, None, "its creator is granted what it asks");
    s.vfs.may_delete(&who, "sticky/own").unwrap();
    let opened = s.vfs.open(&asked(&who, "sticky/own")).unwrap();
    assert_eq!(opened.may_unlink, Some(true));
}

#[test]
fn a_listing_can_tell_what_its_reader_may_read() {
    let s = share();
    chmod(s.root.parent().unwrap(), 0o755);
    chmod(&s.root, 0o755);
    fs::write(s.root.join("open"), b"").unwrap();
    fs::write(s.root.join("closed"), b"").unwrap();
    chmod(&s.root.join("closed"), 0o600);
    let as_server = open(&s.vfs, "").unwrap();
    assert!(s.vfs.may_read_entry(&as_server.handle, "closed").unwrap());
    assert!(!s.vfs.may_read_entry(&as_server.handle, "gone").unwrap());
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let who = nobody();
    let as_nobody = s
        .vfs
        .open(&OpenRequest {
            who: &who,
            ..req("", Disposition::Open, Kind::Directory)
        })
        .unwrap();
    assert!(s.vfs.may_read_entry(&as_nobody.handle, "open").unwrap());
    assert!(!s.vfs.may_read_entry(&as_nobody.handle, "closed").unwrap());
}

fn mode_of(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn new_objects_get_the_share_s_modes_whatever_the_umask() {
    let s = share();
    // Samba's defaults, whatever the test's umask (changing it here would
    // race the other tests' files).
    create_file(&s.vfs, "plain.txt", b"x");
    create_dir(&s.vfs, "plain");
    assert_eq!(mode_of(&s.root.join("plain.txt")), 0o644);
    assert_eq!(mode_of(&s.root.join("plain")), 0o755);

    // A group share: files and folders the group may change (which a
    // umask of 022 would not let through), folders setgid (which mkdir
    // alone does not set).
    let vfs = PosixVfs::new(&s.root).unwrap().with_modes(NewModes {
        create_mask: 0o770,
        force_create_mode: 0o660,
        directory_mask: 0o770,
        force_directory_mode: 0o2770,
        ..NewModes::default()
    });
    create_file(&vfs, "group.txt", b"x");
    create_dir(&vfs, "group");
    assert_eq!(mode_of(&s.root.join("group.txt")), 0o660);
    assert_eq!(mode_of(&s.root.join("group")), 0o2770);
}

#[test]
fn what_is_made_read_only_still_gets_its_attributes() {
    let s = share();
    let vfs = PosixVfs::new(&s.root).unwrap().with_modes(NewModes {
        create_mask: 0o444,
        directory_mask: 0o555,
        ..NewModes::default()
    });
    // As its owner, who may not write a user xattr of a read-only object
    // without the server's powers.
    let who = match rustix::process::geteuid().is_root() {
        true => {
            chmod(s.root.parent().unwrap(), 0o755);
            std::os::unix::fs::chown(&s.root, Some(65534), Some(65534)).unwrap();
            nobody()
        }
        false => Identity::Server,
    };
    for (name, kind, mode) in [
        ("ro.txt", Kind::NonDirectory, 0o444),
        ("ro", Kind::Directory, 0o555),
    ] {
        let o = vfs
            .open(&OpenRequest {
                who: &who,
                attributes: attr::HIDDEN,
                ..req(name, Disposition::Create, kind)
            })
            .unwrap();
        assert_eq!(o.stat.attributes & attr::HIDDEN, attr::HIDDEN, "{name}");
        assert_eq!(mode_of(&s.root.join(name)), mode, "{name}");
    }
}

#[test]
fn inherited_permissions_follow_the_folder() {
    use std::os::unix::fs::PermissionsExt;
    let s = share();
    fs::create_dir(s.root.join("family")).unwrap();
    fs::set_permissions(s.root.join("family"), fs::Permissions::from_mode(0o2770)).unwrap();
    let vfs = PosixVfs::new(&s.root).unwrap().with_modes(NewModes {
        inherit_permissions: true,
        ..NewModes::default()
    });
    create_file(&vfs, "family/plan.txt", b"x");
    create_dir(&vfs, "family/photos");
    create_file(&vfs, "family/photos/beach.jpg", b"x");
    assert_eq!(mode_of(&s.root.join("family/plan.txt")), 0o660);
    assert_eq!(mode_of(&s.root.join("family/photos")), 0o2770);
    assert_eq!(mode_of(&s.root.join("family/photos/beach.jpg")), 0o660);
}

/// A POSIX default ACL in its binary xattr form: the owner and the group
/// `rwx`, others nothing.
fn default_acl_owner_and_group_only() -> Vec<u8> {
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm) in [(0x01u16, 7u16), (0x04, 7), (0x20, 0)] {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(u32::MAX.to_le_bytes());
    }
    acl
}

#[test]
fn a_default_acl_decides_and_inherit_acls_lets_it_through() {
    let s = share();
    let dir = s.root.join("acl");
    fs::create_dir(&dir).unwrap();
    let d = fs::File::open(&dir).unwrap();
    rustix::fs::fsetxattr(
        &d,
        "system.posix_acl_default",
        &default_acl_owner_and_group_only(),
        rustix::fs::XattrFlags::empty(),
    )
    .expect("a filesystem with POSIX ACLs under the temporary directory");
    assert!(has_default_acl(d.as_fd()));
    // The mode narrows what the ACL gives (the kernel's rule, and
    // Samba's), and the mode is not then forced.
    create_file(&s.vfs, "acl/narrow.txt", b"x");
    assert_eq!(mode_of(&dir.join("narrow.txt")), 0o640);
    let vfs = PosixVfs::new(&s.root).unwrap().with_modes(NewModes {
        inherit_acls: true,
        ..NewModes::default()
    });
    create_file(&vfs, "acl/whole.txt", b"x");
    create_dir(&vfs, "acl/sub");
    assert_eq!(mode_of(&dir.join("whole.txt")), 0o660);
    assert_eq!(mode_of(&dir.join("sub")), 0o770);
}

#[test]
fn short_names_open_their_long_names_and_take_them_back_when_gone() {
    let s = share();
    create_dir(&s.vfs, "d");
    create_file(&s.vfs, "d/A long name.text", b"x");
    let short = shortname::short_name("A long name.text");
    let o = open(&s.vfs, &format!("d/{}", short.to_lowercase())).unwrap();
    assert_eq!(o.path, "d/A long name.text");
    drop(o);
    // Deleted, then made again by its short name: the long name is back
    // (NTFS tunneling).
    s.vfs
        .unlink(&Identity::Server, &format!("d/{short}"), false)
        .unwrap();
    assert!(matches!(
        open(&s.vfs, &format!("d/{short}")),
        Err(VfsError::NameNotFound)
    ));
    let o = create_file(&s.vfs, &format!("d/{short}"), b"y");
    assert_eq!(o.path, "d/A long name.text");
    assert_eq!(disk_names(&s.root.join("d")), vec!["A long name.text"]);
    // Only once: the next is made by the name it is given.
    s.vfs
        .unlink(&Identity::Server, "d/A long name.text", false)
        .unwrap();
    create_file(&s.vfs, "d/OTHER~123.TXT", b"z");
    assert_eq!(disk_names(&s.root.join("d")), vec!["OTHER~123.TXT"]);
}

#[test]
fn a_set_change_time_stays_through_attribute_changes_until_the_data_changes() {
    let s = share();
    let o = create_file(&s.vfs, "f", b"x");
    let set_at = 132_000_000_000_000_000;
    let times = SetTimes {
        change_time: Some(set_at),
        ..SetTimes::default()
    };
    s.vfs.set_times(&o.handle, &times).unwrap();
    s.vfs.set_attributes(&o.handle, attr::HIDDEN).unwrap();
    let write_only = SetTimes {
        last_write_time: Some(131_000_000_000_000_000),
        ..SetTimes::default()
    };
    s.vfs.set_times(&o.handle, &write_only).unwrap();
    assert_eq!(s.vfs.stat(&o.handle).unwrap().change_time, set_at);
    s.vfs.write(&o.handle, 0, b"new").unwrap();
    assert_ne!(s.vfs.stat(&o.handle).unwrap().change_time, set_at);
}

#[test]
fn eas_are_kept_with_the_object_and_the_share_marked() {
    let s = share();
    assert!(!s.vfs.eas_stored());
    let o = create_file(&s.vfs, "f", b"x");
    let ea = |name: &str, value: &[u8]| Ea {
        flags: 0,
        name: name.into(),
        value: value.to_vec(),
    };
    assert!(s.vfs.eas(&o.handle).unwrap().is_empty());
    s.vfs
        .set_eas(&o.handle, &[ea("ONE", b"1"), ea("TWO", b"2")])
        .unwrap();
    s.vfs.set_eas(&o.handle, &[ea("one", b"")]).unwrap();
    assert!(s.vfs.eas_stored());
    assert_eq!(s.vfs.eas(&o.handle).unwrap(), [ea("TWO", b"2")]);
    // Their size comes with the stat, and with the listing's.
    let size = crate::eas::encode(&[ea("TWO", b"2")]).len() as u32;
    assert_eq!(s.vfs.stat(&o.handle).unwrap().ea_size, size);
    let root = open(&s.vfs, "").unwrap();
    let listed = s.vfs.entry(&root.handle, "f").unwrap().unwrap();
    assert_eq!(listed.ea_size, size);
    // The set, and the share's mark, survive a restart.
    let vfs = PosixVfs::new(&s.root).unwrap();
    assert!(vfs.eas_stored());
    let again = open(&vfs, "F").unwrap();
    assert_eq!(vfs.eas(&again.handle).unwrap(), [ea("TWO", b"2")]);
    assert_eq!(again.stat.ea_size, size);
    vfs.set_eas(&again.handle, &[ea("Two", b"")]).unwrap();
    assert!(vfs.eas(&again.handle).unwrap().is_empty());
    assert_eq!(vfs.stat(&again.handle).unwrap().ea_size, 0);
}

/// The whole of a handle's data, however long.
fn contents(vfs: &PosixVfs, h: &FileHandle) -> Vec<u8> {
    let mut buf = vec![0u8; vfs.stat(h).unwrap().size as usize];
    let n = vfs.read(h, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn sparse_files_keep_their_mark_and_their_holes() {
    let s = share();
    let data: Vec<u8> = (0..3 * 65536).map(|i| (i % 251) as u8).collect();
    let o = create_file(&s.vfs, "f", &data);
    let h = &o.handle;
    s.vfs.set_sparse(h, true).unwrap();
    assert_ne!(s.vfs.stat(h).unwrap().attributes & attr::SPARSE_FILE, 0);
    // Setting the settable bits keeps the mark.
    s.vfs.set_attributes(h, attr::HIDDEN).unwrap();
    let attributes = s.vfs.stat(h).unwrap().attributes;
    assert_eq!(attributes, attr::HIDDEN | attr::SPARSE_FILE);

    s.vfs.zero_range(h, 65536, 65536, true).unwrap();
    let back = contents(&s.vfs, h);
    assert_eq!(back.len(), data.len());
    assert!(back[65536..131072].iter().all(|&b| b == 0));
    assert!(back[131072..] == data[131072..]);
    let ranges = |from, to, limit| -> Vec<(u64, u64)> {
        let found = s.vfs.allocated_ranges(h, from, to, limit).unwrap();
        found.into_iter().map(|r| (r.start, r.end)).collect()
    };
    // Filesystems without holes (or that free less) allocate it all.
    if ranges(0, 3 * 65536, 8).len() == 2 {
        assert_eq!(ranges(0, 3 * 65536, 8), [(0, 65536), (131072, 3 * 65536)]);
        assert_eq!(ranges(0, 3 * 65536, 1), [(0, 65536)]);
        assert_eq!(ranges(70000, 80000, 8), []);
    } else {
        assert_eq!(ranges(0, 3 * 65536, 8), [(0, 3 * 65536)]);
    }

    // No longer sparse: the hole is allocated again, and the mark gone.
    s.vfs.set_sparse(h, false).unwrap();
    let st = s.vfs.stat(h).unwrap();
    assert_eq!(st.attributes & attr::SPARSE_FILE, 0);
    assert_eq!(ranges(0, 3 * 65536, 8), [(0, 3 * 65536)]);
    assert!(contents(&s.vfs, h) == back);
}

#[test]
fn ranges_copy_within_and_between_files() {
    let s = share();
    let data: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
    let src = create_file(&s.vfs, "src", &data);
    let dst = create_file(&s.vfs, "dst", b"");
    assert_eq!(
        s.vfs
            .copy_range(&src.handle, 1000, &dst.handle, 10, 50_000)
            .unwrap(),
        50_000
    );
    let back = contents(&s.vfs, &dst.handle);
    assert!(back[10..] == data[1000..51_000]);
    assert!(back[..10].iter().all(|&b| b == 0));
    // Past the source's end: what there is.
    assert_eq!(
        s.vfs
            .copy_range(&src.handle, 99_000, &dst.handle, 0, 5000)
            .unwrap(),
        1000
    );
    // Overlapping ranges of one file read before they are written.
    assert_eq!(
        s.vfs
            .copy_range(&src.handle, 0, &src.handle, 100, 4096)
            .unwrap(),
        4096
    );
    let back = contents(&s.vfs, &src.handle);
    assert!(back[100..4196] == data[..4096]);
    // A stream's data is not a file's: the caller reads and writes.
    let (stream, _) = s
        .vfs
        .open_stream(&src.handle, "s", Disposition::Create)
        .unwrap();
    assert!(matches!(
        s.vfs.copy_range(&stream, 0, &dst.handle, 0, 1),
        Err(VfsError::NotSupported)
    ));
}
