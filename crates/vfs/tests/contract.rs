//! The contract of the `Vfs` trait, held against both backends: every
//! scenario runs on a PosixVfs over a temporary directory and on a
//! MemoryVfs, asserts what the trait promises, and keeps a transcript of
//! every outcome; the two transcripts must be equal, so the in-memory
//! backend can stand in for the real one in tests of the core.

use std::fmt::Debug;
use std::time::Duration;

use copyless_vfs::memory::MemoryVfs;
use copyless_vfs::posix::PosixVfs;
use copyless_vfs::{
    attr, CreateAction, Disposition, Ea, FileHandle, FileStat, Identity, Kind, OpenRequest, Opened,
    SetTimes, Vfs, VfsError, VfsResult,
};

use CreateAction::{Created, Opened as Existed, Overwritten, Superseded};
use Disposition::{Create, Open, OpenIf, Overwrite, OverwriteIf, Supersede};

/// 2000-01-01, 2010 and 2020 as FILETIMEs: old enough that any change made
/// now moves a time away from them.
const Y2000: u64 = 125_911_584_000_000_000;
const Y2010: u64 = 129_067_776_000_000_000;
const Y2020: u64 = 132_223_104_000_000_000;

struct Run {
    name: &'static str,
    vfs: Box<dyn Vfs>,
    /// What happened, in words both backends must agree on.
    log: Vec<String>,
    _tmp: Option<tempfile::TempDir>,
}

/// Runs `scenario` on both backends and compares what they did.
fn on_both(scenario: impl Fn(&mut Run)) {
    let tmp = tempfile::tempdir().unwrap();
    let posix = Run {
        name: "posix",
        vfs: Box::new(PosixVfs::new(tmp.path()).unwrap()),
        log: Vec::new(),
        _tmp: Some(tmp),
    };
    let memory = Run {
        name: "memory",
        vfs: Box::new(MemoryVfs::new()),
        log: Vec::new(),
        _tmp: None,
    };
    let mut logs = Vec::new();
    for mut run in [posix, memory] {
        scenario(&mut run);
        assert!(!run.log.is_empty(), "the scenario recorded nothing");
        logs.push(run.log);
    }
    for (i, (p, m)) in logs[0].iter().zip(&logs[1]).enumerate() {
        assert_eq!(p, m, "step {i}: posix (left) and memory (right) differ");
    }
    assert_eq!(logs[0].len(), logs[1].len());
}

/// An error as the core sees it; OS errors by their number.
fn error_name(e: &VfsError) -> String {
    match e {
        VfsError::Io(io) => format!("Io({})", io.raw_os_error().unwrap_or(-1)),
        e => format!("{e:?}"),
    }
}

/// What both backends must agree on in a stat; sizes on disk and times
/// depend on the filesystem and the clock, and are checked apart.
fn summary(st: &FileStat) -> String {
    format!(
        "size={} dir={} attrs={:#x} nlink={}",
        st.size, st.is_dir, st.attributes, st.nlink
    )
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

impl Run {
    fn note(&mut self, what: &str, value: impl Debug) {
        self.log.push(format!("{what}: {value:?}"));
    }

    /// Records a result; Ok as `ok` describes it.
    fn outcome<T>(&mut self, what: &str, r: &VfsResult<T>, ok: impl FnOnce(&T) -> String) {
        let line = match r {
            Ok(v) => format!("{what}: ok {}", ok(v)),
            Err(e) => format!("{what}: {}", error_name(e)),
        };
        self.log.push(line);
    }

    /// Records a result that must be the error `want`.
    fn fails<T: Debug>(&mut self, what: &str, r: VfsResult<T>, want: &str) {
        self.outcome(what, &r, |v| format!("{v:?}"));
        match r {
            Err(e) => assert_eq!(error_name(&e), want, "{}: {what}", self.name),
            Ok(v) => panic!("{}: {what}: expected {want}, got Ok({v:?})", self.name),
        }
    }

    fn open_with(&mut self, r: &OpenRequest<'_>) -> VfsResult<Opened> {
        let result = self.vfs.open(r);
        let what = format!("open {:?} {:?} {:?}", r.path, r.disposition, r.kind);
        self.outcome(&what, &result, |o| {
            format!(
                "{:?} {:?} handle_dir={} {}",
                o.action,
                o.path,
                o.handle.is_dir,
                summary(&o.stat)
            )
        });
        result
    }

    fn open(&mut self, path: &str, disposition: Disposition, kind: Kind) -> VfsResult<Opened> {
        self.open_with(&req(path, disposition, kind))
    }

    fn create_file(&mut self, path: &str, data: &[u8]) -> Opened {
        let o = self.open(path, Create, Kind::NonDirectory).unwrap();
        self.vfs.write(&o.handle, 0, data).unwrap();
        o
    }

    fn create_dir(&mut self, path: &str) -> Opened {
        self.open(path, Create, Kind::Directory).unwrap()
    }

    fn read_at(&mut self, h: &FileHandle, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        let n = self.vfs.read(h, offset, &mut buf).unwrap();
        buf.truncate(n);
        self.note(
            &format!("read {offset}+{len}"),
            String::from_utf8_lossy(&buf),
        );
        buf
    }

    fn read_all(&mut self, h: &FileHandle) -> Vec<u8> {
        self.read_at(h, 0, 1 << 16)
    }

    fn stat(&mut self, h: &FileHandle) -> FileStat {
        let st = self.vfs.stat(h).unwrap();
        self.log.push(format!("stat: {}", summary(&st)));
        st
    }

    fn names(&mut self, h: &FileHandle) -> Vec<String> {
        let names = self.vfs.list_names(h).unwrap();
        self.note("list", &names);
        names
    }
}

/// Lets the kernel's coarse clock move on, so that a change made next is
/// sure to show in a time on disk.
fn settle() {
    std::thread::sleep(Duration::from_millis(15));
}

#[test]
fn dispositions_on_absent_files_and_directories() {
    on_both(|r| {
        let dispositions = [Supersede, Open, Create, OpenIf, Overwrite, OverwriteIf];
        let kinds = [Kind::Directory, Kind::NonDirectory, Kind::Any];
        let mut i = 0;
        for existing in ["absent", "file", "dir"] {
            for d in dispositions {
                for k in kinds {
                    i += 1;
                    let path = format!("obj{i}");
                    match existing {
                        "file" => {
                            r.create_file(&path, b"content");
                        }
                        "dir" => {
                            r.create_dir(&path);
                        }
                        _ => {}
                    }
                    let upper = path.to_uppercase();
                    let got = r.open(&upper, d, k);
                    let want: Result<(CreateAction, bool), &str> = match (existing, d, k) {
                        ("absent", Open | Overwrite, _) => Err("NameNotFound"),
                        ("absent", _, Kind::Directory) => Ok((Created, true)),
                        ("absent", _, _) => Ok((Created, false)),
                        (_, Create, _) => Err("Collision"),
                        ("file", _, Kind::Directory) => Err("NotADirectory"),
                        ("file", Open | OpenIf, _) => Ok((Existed, false)),
                        ("file", Supersede, _) => Ok((Superseded, false)),
                        ("file", _, _) => Ok((Overwritten, false)),
                        ("dir", Open | OpenIf, Kind::Directory | Kind::Any) => Ok((Existed, true)),
                        _ => Err("IsADirectory"),
                    };
                    let what = format!("{existing} {d:?} {k:?}");
                    match (got, want) {
                        (Ok(o), Ok((action, is_dir))) => {
                            assert_eq!((o.action, o.stat.is_dir), (action, is_dir), "{what}");
                            assert_eq!(o.handle.is_dir, is_dir, "{what}");
                            // A created name keeps the case it was given.
                            let real = if action == Created { &upper } else { &path };
                            assert_eq!(&o.path, real, "{what}");
                            let size = if action == Existed && !is_dir { 7 } else { 0 };
                            if !is_dir {
                                assert_eq!(o.stat.size, size, "{what}");
                            }
                        }
                        (Err(e), Err(want)) => assert_eq!(error_name(&e), want, "{what}"),
                        (got, want) => panic!("{}: {what}: {got:?}, wanted {want:?}", r.name),
                    }
                }
            }
        }
    });
}

#[test]
fn the_root_opens_only_as_a_directory() {
    on_both(|r| {
        let o = r.open("", Open, Kind::Any).unwrap();
        assert!(o.handle.is_dir && o.stat.is_dir);
        assert_eq!(o.path, "");
        r.open("", OpenIf, Kind::Directory).unwrap();
        let create = r.open("", Create, Kind::Directory);
        r.fails("root create", create, "Collision");
        let overwrite = r.open("", OverwriteIf, Kind::Any);
        r.fails("root overwrite", overwrite, "IsADirectory");
        let as_file = r.open("", Open, Kind::NonDirectory);
        r.fails("root as file", as_file, "IsADirectory");
    });
}

#[test]
fn lookup_ignores_case_and_names_keep_theirs() {
    on_both(|r| {
        r.create_dir("SubDir");
        r.create_file("SubDir/Ärger.Txt", b"hello");
        let o = r.open("subdir/äRGER.txt", Open, Kind::Any).unwrap();
        assert_eq!(o.path, "SubDir/Ärger.Txt");
        assert_eq!(r.read_all(&o.handle), b"hello");
        // A new name beneath a directory given in another case lands in it.
        let o = r.open("SUBDIR/Inner.Bin", Create, Kind::Any).unwrap();
        assert_eq!(o.path, "SubDir/Inner.Bin");
        let collide = r.open("subdir/INNER.BIN", Create, Kind::Any);
        r.fails("create in other case", collide, "Collision");
        let d = r.open("SUBDIR", Open, Kind::Directory).unwrap();
        assert_eq!(r.names(&d.handle), ["Inner.Bin", "Ärger.Txt"]);
        let resolved = r.vfs.resolve(&Identity::Server, "sUBdIR/inner.bin");
        r.outcome("resolve", &resolved, |p| p.clone());
        assert_eq!(resolved.unwrap(), "SubDir/Inner.Bin");
        assert_eq!(r.vfs.resolve(&Identity::Server, "").unwrap(), "");
    });
}

#[test]
fn missing_and_invalid_names() {
    on_both(|r| {
        r.create_file("file", b"");
        r.create_dir("dir");
        let cases: [(&str, &str); 6] = [
            ("nothing", "NameNotFound"),
            ("dir/nothing", "NameNotFound"),
            ("nodir/x", "PathNotFound"),
            ("a/b/c", "PathNotFound"),
            ("file/x", "PathNotFound"),
            ("file/x/y", "PathNotFound"),
        ];
        for (path, want) in cases {
            let open = r.open(path, Open, Kind::Any);
            r.fails(&format!("open {path}"), open, want);
            let resolve = r.vfs.resolve(&Identity::Server, path);
            r.fails(&format!("resolve {path}"), resolve, want);
        }
        let create = r.open("nodir/x", Create, Kind::Any);
        r.fails("create beneath nothing", create, "PathNotFound");
        let overwrite = r.open("nothing", Overwrite, Kind::Any);
        r.fails("overwrite nothing", overwrite, "NameNotFound");
        for bad in [
            "../x", "a/../b", "./x", "a//b", "/etc", "dir/", "x\0y", "a\\b",
        ] {
            let open = r.open(bad, OpenIf, Kind::Any);
            r.fails(&format!("open {bad:?}"), open, "InvalidName");
            let resolve = r.vfs.resolve(&Identity::Server, bad);
            r.fails(&format!("resolve {bad:?}"), resolve, "InvalidName");
        }
        // Names are bounded in bytes, not characters.
        let longest = "x".repeat(255);
        r.open(&longest, Create, Kind::Any).unwrap();
        for long in ["x".repeat(256), "ä".repeat(128)] {
            let create = r.open(&long, Create, Kind::Any);
            r.fails("create a long name", create, "InvalidName");
            let open = r.open(&format!("{long}/x"), OpenIf, Kind::Any);
            r.fails("a long directory", open, "InvalidName");
        }
    });
}

#[test]
fn read_write_and_sizes() {
    on_both(|r| {
        let o = r.create_file("f", b"hello world");
        let h = &o.handle;
        assert_eq!(r.read_at(h, 6, 5), b"world");
        // Short only at end of file.
        assert_eq!(r.read_at(h, 9, 5), b"ld");
        assert!(r.read_at(h, 100, 5).is_empty());
        r.vfs.write(h, 20, b"!").unwrap();
        assert_eq!(r.stat(h).size, 21);
        assert_eq!(r.read_at(h, 9, 100), b"ld\0\0\0\0\0\0\0\0\0!");
        r.vfs.set_len(h, 5).unwrap();
        assert_eq!(r.read_all(h), b"hello");
        // Growing reads back zeros, also where data was cut before.
        r.vfs.set_len(h, 12).unwrap();
        assert_eq!(r.read_all(h), b"hello\0\0\0\0\0\0\0");
        r.vfs.write(h, 3, b"").unwrap();
        assert_eq!(r.stat(h).size, 12);
        r.vfs.flush(h).unwrap();
        // A write across block boundaries, far out.
        let big: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        r.vfs.write(h, 1 << 20, &big).unwrap();
        assert_eq!(r.stat(h).size, (1 << 20) + 10_000);
        let mut back = vec![0u8; 10_010];
        let n = r.vfs.read(h, (1 << 20) - 5, &mut back).unwrap();
        r.note("far read", n);
        assert_eq!(n, 10_005);
        assert_eq!(&back[..5], &[0; 5]);
        assert_eq!(&back[5..n], &big[..]);
        r.vfs.set_len(h, 5).unwrap();

        r.vfs.set_allocation(h, 1 << 20).unwrap();
        let st = r.stat(h);
        assert!(
            st.alloc_size >= 1 << 20,
            "{}: alloc {}",
            r.name,
            st.alloc_size
        );
        // Smaller than what is allocated: nothing happens.
        r.vfs.set_allocation(h, 1).unwrap();
        assert_eq!(r.stat(h).size, 5);
        let pre = r
            .open_with(&OpenRequest {
                who: &Identity::Server,
                allocation_size: 65536,
                ..req("pre", Create, Kind::Any)
            })
            .unwrap();
        assert_eq!(pre.stat.size, 0);
        assert!(pre.stat.alloc_size >= 65536, "{}", r.name);
        // Overwriting gives up what was allocated.
        let again = r.open("pre", Overwrite, Kind::Any).unwrap();
        assert!(again.stat.alloc_size < 65536, "{}", r.name);
    });
}

#[test]
fn handles_do_what_they_were_opened_for() {
    on_both(|r| {
        r.create_file("f", b"data");
        let d = r.create_dir("d");
        let ro = r
            .open_with(&OpenRequest {
                who: &Identity::Server,
                write: false,
                ..req("f", Open, Kind::Any)
            })
            .unwrap();
        assert_eq!(r.read_all(&ro.handle), b"data");
        let write = r.vfs.write(&ro.handle, 0, b"x");
        r.fails("write read-only", write, "Io(9)");
        let set_len = r.vfs.set_len(&ro.handle, 1);
        r.fails("truncate read-only", set_len, "Io(22)");
        let alloc = r.vfs.set_allocation(&ro.handle, 1 << 20);
        r.fails("preallocate read-only", alloc, "Io(9)");
        // Nothing to write is no write at all.
        r.vfs.write(&ro.handle, 0, b"").unwrap();
        // Truncating opens write even when not asked to.
        let trunc = r
            .open_with(&OpenRequest {
                who: &Identity::Server,
                write: false,
                ..req("f", Overwrite, Kind::Any)
            })
            .unwrap();
        r.vfs.write(&trunc.handle, 0, b"new").unwrap();
        assert_eq!(r.read_all(&ro.handle), b"new");

        let mut buf = [0u8; 4];
        let read = r.vfs.read(&d.handle, 0, &mut buf);
        r.fails("read a directory", read, "IsADirectory");
        let write = r.vfs.write(&d.handle, 0, b"x");
        r.fails("write a directory", write, "Io(9)");
        let set_len = r.vfs.set_len(&d.handle, 0);
        r.fails("truncate a directory", set_len, "Io(22)");
        r.vfs.flush(&d.handle).unwrap();
        let list = r.vfs.list_names(&ro.handle);
        r.fails("list a file", list, "NotADirectory");
        let entry = r.vfs.entry(&ro.handle, "x");
        r.fails("entry of a file", entry, "PathNotFound");
        let empty = r.vfs.is_empty_dir(&ro.handle);
        r.fails("is a file empty", empty, "Io(20)");
    });
}

#[test]
fn an_unlinked_file_stays_usable_through_its_handles() {
    on_both(|r| {
        let o = r.create_file("f", b"before");
        let other = r.open("F", Open, Kind::Any).unwrap();
        r.vfs.unlink(&Identity::Server, "f", false).unwrap();
        let gone = r.open("f", Open, Kind::Any);
        r.fails("open after unlink", gone, "NameNotFound");
        r.vfs.write(&o.handle, 6, b" after").unwrap();
        assert_eq!(r.read_all(&other.handle), b"before after");
        assert_eq!(r.stat(&o.handle).nlink, 0);
        // A new file by the same name is another object.
        let new = r.create_file("f", b"new");
        assert_eq!(r.read_all(&o.handle), b"before after");
        assert_eq!(r.read_all(&new.handle), b"new");
        assert_ne!(r.vfs.stat(&new.handle).unwrap().ino, o.stat.ino);
    });
}

#[test]
fn directories_and_listings() {
    on_both(|r| {
        for name in ["b", "a", "C"] {
            r.create_file(name, b"12");
        }
        let d = r.create_dir("d");
        r.create_dir("d/sub");
        let root = r.open("", Open, Kind::Any).unwrap();
        assert_eq!(r.names(&root.handle), ["C", "a", "b", "d"]);
        let list = r.vfs.read_dir(&root.handle).unwrap();
        let entries: Vec<String> = list
            .iter()
            .map(|e| format!("{} {}", e.name, summary(&e.stat)))
            .collect();
        r.note("read_dir", &entries);
        let by = |n: &str| &list.iter().find(|e| e.name == n).unwrap().stat;
        assert!(by("d").is_dir);
        assert_eq!(by("d").attributes, attr::DIRECTORY);
        assert_eq!(by("d").nlink, 3, "{}: . , .. and sub", r.name);
        assert_eq!(by("a").size, 2);
        assert_eq!(by("a").attributes, attr::ARCHIVE);
        // Entries are looked up by their real name only.
        let a = r.vfs.entry(&root.handle, "a").unwrap().unwrap();
        assert_eq!(a.ino, by("a").ino);
        let upper = r.vfs.entry(&root.handle, "A").unwrap();
        r.note("entry A", upper.is_some());
        assert!(upper.is_none());
        assert!(r.vfs.entry(&root.handle, "zzz").unwrap().is_none());
        assert!(!r.vfs.is_empty_dir(&root.handle).unwrap());
        assert!(!r.vfs.is_empty_dir(&d.handle).unwrap());
        let sub = r.open("D/SUB", Open, Kind::Directory).unwrap();
        assert!(r.vfs.is_empty_dir(&sub.handle).unwrap());
        assert!(r.names(&sub.handle).is_empty());
        // A listing through a handle follows changes made since.
        r.vfs.unlink(&Identity::Server, "b", false).unwrap();
        assert_eq!(r.names(&root.handle), ["C", "a", "d"]);
        assert!(r.vfs.entry(&root.handle, "b").unwrap().is_none());
    });
}

#[test]
fn rename_within_and_across_directories() {
    on_both(|r| {
        r.create_dir("Src");
        r.create_dir("Dst");
        let f = r.create_file("Src/file", b"x");
        // The target's parent is resolved case-insensitively.
        let moved = r
            .vfs
            .rename(&Identity::Server, "Src/file", "dst/New Name", false);
        r.outcome("rename across", &moved, |p| p.clone());
        assert_eq!(moved.unwrap(), "Dst/New Name");
        let gone = r.open("src/FILE", Open, Kind::Any);
        r.fails("open old name", gone, "NameNotFound");
        assert_eq!(
            r.open("DST/new name", Open, Kind::Any).unwrap().path,
            "Dst/New Name"
        );
        // The handle follows the object.
        r.vfs.write(&f.handle, 1, b"y").unwrap();
        let o = r.open("Dst/New Name", Open, Kind::Any).unwrap();
        assert_eq!(r.read_all(&o.handle), b"xy");
        // A directory moves with what is in it.
        let moved = r.vfs.rename(&Identity::Server, "dst", "Src/Inner", false);
        r.outcome("rename a directory", &moved, |p| p.clone());
        assert_eq!(moved.unwrap(), "Src/Inner");
        assert_eq!(
            r.open("src/inner/NEW NAME", Open, Kind::Any).unwrap().path,
            "Src/Inner/New Name"
        );
        let cases: [(&str, &str, &str); 5] = [
            ("Src/Inner/New Name", "nowhere/x", "PathNotFound"),
            ("Src/missing", "x", "NameNotFound"),
            ("missing/x", "x", "PathNotFound"),
            ("", "x", "AccessDenied"),
            ("Src", "", "AccessDenied"),
        ];
        for (from, to, want) in cases {
            let got = r.vfs.rename(&Identity::Server, from, to, false);
            r.fails(&format!("rename {from:?} {to:?}"), got, want);
        }
        // Beneath itself.
        let into = r.vfs.rename(&Identity::Server, "Src", "src/inner/x", false);
        r.fails("rename into itself", into, "InvalidName");
        let into = r.vfs.rename(&Identity::Server, "Src", "Src/x", true);
        r.fails("rename into itself, replacing", into, "InvalidName");
        let long = format!("Src/{}", "y".repeat(256));
        let too_long = r
            .vfs
            .rename(&Identity::Server, "Src/Inner/New Name", &long, false);
        r.fails("rename to a long name", too_long, "InvalidName");
    });
}

#[test]
fn rename_onto_existing_names() {
    on_both(|r| {
        r.create_file("a", b"from a");
        let b = r.create_file("b", b"from b");
        r.create_dir("dir");
        r.create_dir("dir2");
        let cases: [(&str, &str, bool, &str); 5] = [
            ("a", "B", false, "Collision"),
            ("a", "DIR", true, "AccessDenied"),
            ("a", "DIR", false, "Collision"),
            ("dir2", "dir", true, "AccessDenied"),
            ("dir2", "b", true, "PathNotFound"),
        ];
        for (from, to, replace, want) in cases {
            let got = r.vfs.rename(&Identity::Server, from, to, replace);
            r.fails(&format!("rename {from} {to} {replace}"), got, want);
        }
        let replaced = r.vfs.rename(&Identity::Server, "a", "B", true);
        r.outcome("replace", &replaced, |p| p.clone());
        assert_eq!(replaced.unwrap(), "B");
        let root = r.open("", Open, Kind::Any).unwrap();
        assert_eq!(r.names(&root.handle), ["B", "dir", "dir2"]);
        let o = r.open("b", Open, Kind::Any).unwrap();
        assert_eq!(o.path, "B");
        assert_eq!(r.read_all(&o.handle), b"from a");
        // The replaced file lives on for whoever holds it.
        assert_eq!(r.read_all(&b.handle), b"from b");
        assert_eq!(r.stat(&b.handle).nlink, 0);
    });
}

#[test]
fn rename_changing_only_case() {
    on_both(|r| {
        r.create_file("foo.txt", b"x");
        let renamed = r.vfs.rename(&Identity::Server, "foo.txt", "FOO.TXT", false);
        r.outcome("case only", &renamed, |p| p.clone());
        assert_eq!(renamed.unwrap(), "FOO.TXT");
        assert_eq!(r.open("foo.txt", Open, Kind::Any).unwrap().path, "FOO.TXT");
        r.create_dir("Dir");
        assert_eq!(
            r.vfs
                .rename(&Identity::Server, "Dir", "dir", false)
                .unwrap(),
            "dir"
        );
        // To exactly the same name: nothing to do, and no collision.
        assert_eq!(
            r.vfs
                .rename(&Identity::Server, "dir", "dir", false)
                .unwrap(),
            "dir"
        );
        // The source is found case-insensitively too.
        assert_eq!(
            r.vfs
                .rename(&Identity::Server, "DIR", "Dir", false)
                .unwrap(),
            "Dir"
        );
        let root = r.open("", Open, Kind::Any).unwrap();
        assert_eq!(r.names(&root.handle), ["Dir", "FOO.TXT"]);
    });
}

#[test]
fn unlink_files_and_directories() {
    on_both(|r| {
        r.create_dir("d");
        r.create_file("d/f", b"");
        let cases: [(&str, bool, &str); 6] = [
            ("d", true, "NotEmpty"),
            ("d", false, "IsADirectory"),
            ("d/f", true, "NotADirectory"),
            ("d/missing", false, "NameNotFound"),
            ("missing/f", false, "PathNotFound"),
            ("", true, "AccessDenied"),
        ];
        for (path, is_dir, want) in cases {
            let got = r.vfs.unlink(&Identity::Server, path, is_dir);
            r.fails(&format!("unlink {path:?} {is_dir}"), got, want);
        }
        r.vfs.unlink(&Identity::Server, "D/F", false).unwrap();
        let gone = r.open("d/f", Open, Kind::Any);
        r.fails("open removed file", gone, "NameNotFound");
        r.vfs.unlink(&Identity::Server, "D", true).unwrap();
        let again = r.vfs.unlink(&Identity::Server, "d", true);
        r.fails("unlink twice", again, "NameNotFound");
        let root = r.open("", Open, Kind::Any).unwrap();
        assert!(r.names(&root.handle).is_empty());
        assert!(r.vfs.is_empty_dir(&root.handle).unwrap());
    });
}

#[test]
fn dos_attributes() {
    on_both(|r| {
        let f = r
            .open_with(&OpenRequest {
                who: &Identity::Server,
                attributes: attr::HIDDEN | attr::READONLY | attr::DIRECTORY | attr::NORMAL,
                ..req("f", Create, Kind::NonDirectory)
            })
            .unwrap();
        let want = attr::HIDDEN | attr::READONLY | attr::ARCHIVE;
        assert_eq!(f.stat.attributes, want);
        // READONLY is a stored bit; the file stays writable.
        r.vfs.write(&f.handle, 0, b"data").unwrap();
        let d = r
            .open_with(&OpenRequest {
                who: &Identity::Server,
                attributes: attr::SYSTEM,
                ..req("d", Create, Kind::Directory)
            })
            .unwrap();
        assert_eq!(d.stat.attributes, attr::SYSTEM | attr::DIRECTORY);
        assert_eq!(r.create_dir("plain").stat.attributes, attr::DIRECTORY);
        r.vfs
            .set_attributes(&d.handle, attr::HIDDEN | attr::DIRECTORY | attr::NORMAL)
            .unwrap();
        assert_eq!(r.stat(&d.handle).attributes, attr::HIDDEN | attr::DIRECTORY);
        r.vfs.set_attributes(&f.handle, 0).unwrap();
        assert_eq!(r.stat(&f.handle).attributes, attr::NORMAL);
        r.vfs.set_attributes(&f.handle, attr::SYSTEM).unwrap();
        // Listings report the same bits.
        let root = r.open("", Open, Kind::Any).unwrap();
        assert_eq!(
            r.vfs.entry(&root.handle, "f").unwrap().unwrap().attributes,
            attr::SYSTEM
        );
        // Overwriting replaces them with what the open asks, and ARCHIVE.
        for (d, action) in [(Overwrite, Overwritten), (Supersede, Superseded)] {
            let o = r
                .open_with(&OpenRequest {
                    who: &Identity::Server,
                    attributes: attr::HIDDEN,
                    ..req("F", d, Kind::Any)
                })
                .unwrap();
            assert_eq!(
                (o.action, o.stat.attributes),
                (action, attr::HIDDEN | attr::ARCHIVE)
            );
        }
        let n = r.open("new", OverwriteIf, Kind::Any).unwrap();
        assert_eq!((n.action, n.stat.attributes), (Created, attr::ARCHIVE));
    });
}

#[test]
fn times_set_and_moved_by_changes() {
    on_both(|r| {
        let d = r.create_dir("d");
        let o = r.create_file("d/f", b"x");
        let h = &o.handle;
        let before = r.vfs.stat(h).unwrap();
        assert!(before.creation_time > Y2020, "{}", r.name);
        assert!(before.last_write_time >= before.creation_time, "{}", r.name);
        let times = SetTimes {
            creation_time: Some(Y2000),
            last_access_time: Some(Y2010 + 1_234_567),
            last_write_time: Some(Y2010 + 7_654_321),
            change_time: Some(Y2020),
        };
        r.vfs.set_times(h, &times).unwrap();
        let st = r.vfs.stat(h).unwrap();
        let four = |st: &FileStat| {
            (
                st.creation_time,
                st.last_access_time,
                st.last_write_time,
                st.change_time,
            )
        };
        r.note("times", four(&st));
        assert_eq!(
            four(&st),
            (Y2000, Y2010 + 1_234_567, Y2010 + 7_654_321, Y2020)
        );
        // None, 0, -1 and -2 leave times alone.
        let keep = SetTimes {
            creation_time: Some(0),
            last_access_time: Some(u64::MAX),
            last_write_time: Some(u64::MAX - 1),
            change_time: None,
        };
        r.vfs.set_times(h, &keep).unwrap();
        assert_eq!(four(&r.vfs.stat(h).unwrap()), four(&st));
        // The directory's listing shows the same.
        assert_eq!(
            four(&r.vfs.entry(&d.handle, "f").unwrap().unwrap()),
            four(&st)
        );

        // A write moves the write and change times, never creation.
        settle();
        r.vfs.write(h, 0, b"y").unwrap();
        let st = r.vfs.stat(h).unwrap();
        let moved = (
            st.creation_time,
            st.last_write_time > Y2020,
            st.change_time > Y2020,
        );
        r.note("after write", moved);
        assert_eq!(moved, (Y2000, true, true), "{}", r.name);
        // A change of attributes moves the change time only.
        r.vfs
            .set_times(
                h,
                &SetTimes {
                    last_write_time: Some(Y2010),
                    ..SetTimes::default()
                },
            )
            .unwrap();
        let before = r.vfs.stat(h).unwrap().change_time;
        settle();
        r.vfs.set_attributes(h, attr::HIDDEN).unwrap();
        let st = r.vfs.stat(h).unwrap();
        let moved = (st.last_write_time, st.change_time > before);
        r.note("after attributes", moved);
        assert_eq!(moved, (Y2010, true), "{}", r.name);
        // Unless the client set it: then attributes, times and EAs it
        // sets leave it (MS-FSA 2.1.4.17, Open.UserSetChangeTime).
        let set_change_time = |vfs: &dyn Vfs| {
            let times = SetTimes {
                change_time: Some(Y2010),
                ..SetTimes::default()
            };
            vfs.set_times(h, &times).unwrap();
        };
        set_change_time(&*r.vfs);
        settle();
        r.vfs.set_attributes(h, attr::ARCHIVE).unwrap();
        let ea = Ea {
            flags: 0,
            name: "A".into(),
            value: b"1".to_vec(),
        };
        r.vfs.set_eas(h, &[ea]).unwrap();
        let st = r.vfs.stat(h).unwrap();
        r.note("kept", st.change_time);
        assert_eq!(st.change_time, Y2010, "{}", r.name);
        // A rename moves it again, as a change of the data would.
        set_change_time(&*r.vfs);
        settle();
        r.vfs
            .rename(&Identity::Server, "d/f", "d/g", false)
            .unwrap();
        let st = r.vfs.stat(h).unwrap();
        let moved = (st.last_write_time, st.change_time > Y2020);
        r.note("after rename", moved);
        assert_eq!(moved, (Y2010, true), "{}", r.name);

        // A directory's write time moves when names come and go.
        for step in ["create", "rename", "unlink"] {
            r.vfs
                .set_times(
                    &d.handle,
                    &SetTimes {
                        last_write_time: Some(Y2010),
                        ..SetTimes::default()
                    },
                )
                .unwrap();
            settle();
            match step {
                "create" => drop(r.create_file("d/new", b"")),
                "rename" => drop(
                    r.vfs
                        .rename(&Identity::Server, "d/new", "d/newer", false)
                        .unwrap(),
                ),
                _ => r.vfs.unlink(&Identity::Server, "d/newer", false).unwrap(),
            }
            let moved = r.vfs.stat(&d.handle).unwrap().last_write_time > Y2020;
            r.note(step, moved);
            assert!(moved, "{}: {step}", r.name);
        }
    });
}

#[test]
fn streams_of_files_and_directories() {
    on_both(|r| {
        let f = r.create_file("f", b"main data");
        let (s, action) = r
            .vfs
            .open_stream(&f.handle, "Zone.Identifier", Create)
            .unwrap();
        r.note("stream created", (action, &s.stream, s.is_dir));
        assert_eq!(action, Created);
        assert_eq!(s.stream.as_deref(), Some("Zone.Identifier"));
        r.vfs.write(&s, 0, b"[ZoneTransfer]").unwrap();
        r.vfs.write(&s, 20, b"!").unwrap();
        assert_eq!(r.read_all(&s), b"[ZoneTransfer]\0\0\0\0\0\0!");
        assert_eq!(r.read_at(&s, 1, 4), b"Zone");
        assert_eq!(r.stat(&s).size, 21);
        // The main data is untouched, and its stat is its own.
        assert_eq!(r.read_all(&f.handle), b"main data");
        assert_eq!(r.stat(&f.handle).size, 9);
        r.vfs.set_len(&s, 6).unwrap();
        assert_eq!(r.read_all(&s), b"[ZoneT");
        r.vfs.set_allocation(&s, 1 << 20).unwrap();
        r.vfs.flush(&s).unwrap();

        let (again, action) = r
            .vfs
            .open_stream(&f.handle, "zone.IDENTIFIER", Open)
            .unwrap();
        assert_eq!(
            (action, again.stream.as_deref()),
            (Existed, Some("Zone.Identifier"))
        );
        let collide = r.vfs.open_stream(&f.handle, "ZONE.identifier", Create);
        r.fails(
            "create an existing stream",
            collide.map(|(_, a)| a),
            "Collision",
        );
        let missing = r.vfs.open_stream(&f.handle, "other", Open);
        r.fails(
            "open a missing stream",
            missing.map(|(_, a)| a),
            "NameNotFound",
        );
        let missing = r.vfs.open_stream(&f.handle, "other", Overwrite);
        r.fails(
            "overwrite a missing stream",
            missing.map(|(_, a)| a),
            "NameNotFound",
        );
        let (other, action) = r.vfs.open_stream(&f.handle, "Other", OverwriteIf).unwrap();
        assert_eq!(action, Created);
        r.vfs.write(&other, 0, b"abc").unwrap();
        let mut list = r.vfs.streams(&f.handle).unwrap();
        list.sort();
        r.note("streams", &list);
        assert_eq!(
            list,
            [("Other".to_string(), 3), ("Zone.Identifier".to_string(), 6)]
        );
        for (d, want) in [
            (Overwrite, Overwritten),
            (Supersede, Superseded),
            (OpenIf, Existed),
        ] {
            let (h, action) = r.vfs.open_stream(&f.handle, "OTHER", d).unwrap();
            assert_eq!(action, want);
            assert_eq!(r.stat(&h).size, 0);
        }

        // Bounded as xattrs are.
        let too_big = r.vfs.write(&other, 65536, b"x");
        r.fails("write past 64 KiB", too_big, "DiskFull");
        let too_big = r.vfs.set_len(&other, 65537);
        r.fails("grow past 64 KiB", too_big, "DiskFull");
        let long = "s".repeat(235);
        let create = r.vfs.open_stream(&f.handle, &long, Create);
        r.fails(
            "create a long stream name",
            create.map(|(_, a)| a),
            "InvalidName",
        );
        let open = r.vfs.open_stream(&f.handle, &long, Open);
        r.fails(
            "open a long stream name",
            open.map(|(_, a)| a),
            "NameNotFound",
        );
        r.vfs
            .open_stream(&f.handle, &"s".repeat(234), Create)
            .unwrap();

        // Streams go with the object when it is renamed.
        r.vfs.rename(&Identity::Server, "f", "g", false).unwrap();
        let g = r.open("g", Open, Kind::Any).unwrap();
        let (z, _) = r
            .vfs
            .open_stream(&g.handle, "zone.identifier", Open)
            .unwrap();
        assert_eq!(r.read_all(&z), b"[ZoneT");

        r.vfs.delete_stream(&s).unwrap();
        let read = r.vfs.read(&s, 0, &mut [0u8; 4]);
        r.fails("read a deleted stream", read, "NameNotFound");
        let stat = r.vfs.stat(&s);
        r.fails("stat a deleted stream", stat, "NameNotFound");
        let write = r.vfs.write(&s, 0, b"x");
        r.fails("write a deleted stream", write, "NameNotFound");
        r.vfs.delete_stream(&s).unwrap();
        let main = r.vfs.delete_stream(&g.handle);
        r.fails("delete the main data", main, "IsADirectory");
        let mut list = r.vfs.streams(&g.handle).unwrap();
        list.sort();
        r.note("streams after delete", &list);
        assert_eq!(list.len(), 2);

        // Directories have streams too; a stream handle is not a directory.
        let d = r
            .open_with(&OpenRequest {
                who: &Identity::Server,
                attributes: attr::HIDDEN,
                ..req("d", Create, Kind::Directory)
            })
            .unwrap();
        let (ds, action) = r.vfs.open_stream(&d.handle, "meta", OpenIf).unwrap();
        assert_eq!(action, Created);
        assert!(!ds.is_dir);
        r.vfs.write(&ds, 0, b"on a dir").unwrap();
        let st = r.stat(&ds);
        assert_eq!(
            (st.size, st.is_dir, st.attributes),
            (8, false, attr::HIDDEN)
        );
        let plain = r.create_dir("plain");
        let (ps, _) = r.vfs.open_stream(&plain.handle, "x", Create).unwrap();
        assert_eq!(r.stat(&ps).attributes, attr::NORMAL);
        assert_eq!(r.vfs.streams(&d.handle).unwrap(), [("meta".to_string(), 8)]);
    });
}

#[test]
fn streams_are_renamed_within_their_object() {
    on_both(|r| {
        let f = r.create_file("f", b"main");
        let (s, _) = r.vfs.open_stream(&f.handle, "one", Create).unwrap();
        r.vfs.write(&s, 0, b"first").unwrap();
        let renamed = r.vfs.rename_stream(&s, "Two", false);
        r.outcome("rename one to Two", &renamed, |n| n.clone());
        assert_eq!(renamed.unwrap(), "Two");
        // The handle keeps its old name, which is gone.
        let stale = r.vfs.read(&s, 0, &mut [0u8; 4]);
        r.fails("read through the old name", stale, "NameNotFound");
        let (two, _) = r.vfs.open_stream(&f.handle, "two", Open).unwrap();
        assert_eq!(two.stream.as_deref(), Some("Two"));
        assert_eq!(r.read_all(&two), b"first");
        // Only the case changes.
        assert_eq!(r.vfs.rename_stream(&two, "TWO", false).unwrap(), "TWO");
        let mut list = r.vfs.streams(&f.handle).unwrap();
        list.sort();
        r.note("after a change of case", &list);
        assert_eq!(list, [("TWO".to_string(), 5)]);

        let (two, _) = r.vfs.open_stream(&f.handle, "two", Open).unwrap();
        let (full, _) = r.vfs.open_stream(&f.handle, "full", Create).unwrap();
        r.vfs.write(&full, 0, b"x").unwrap();
        let collide = r.vfs.rename_stream(&two, "FULL", false);
        r.fails("onto a stream, not replacing", collide, "Collision");
        let not_empty = r.vfs.rename_stream(&two, "FULL", true);
        r.fails("onto a stream with data", not_empty, "NotEmpty");
        r.vfs.set_len(&full, 0).unwrap();
        assert_eq!(r.vfs.rename_stream(&two, "FULL", true).unwrap(), "FULL");
        let mut list = r.vfs.streams(&f.handle).unwrap();
        list.sort();
        r.note("after replacing an empty stream", &list);
        assert_eq!(list, [("FULL".to_string(), 5)]);

        let (s, _) = r.vfs.open_stream(&f.handle, "full", Open).unwrap();
        let long = r.vfs.rename_stream(&s, &"s".repeat(235), false);
        r.fails("to a name too long", long, "InvalidName");
        let main = r.vfs.rename_stream(&f.handle, "x", false);
        r.fails("the main data", main, "IsADirectory");
        assert_eq!(r.read_all(&f.handle), b"main");
    });
}

#[test]
fn security_descriptors() {
    on_both(|r| {
        let f = r.create_file("f", b"");
        let d = r.create_dir("d");
        r.create_dir("d/sub");
        // Until one is stored, none is looked up, whatever the path.
        assert_eq!(r.vfs.security(&f.handle).unwrap(), None);
        assert_eq!(
            r.vfs
                .dir_security(&Identity::Server, "nothing/at/all")
                .unwrap(),
            None
        );
        let sd: Vec<u8> = (1..=100).collect();
        r.vfs.set_security(&f.handle, &sd).unwrap();
        assert_eq!(r.vfs.security(&f.handle).unwrap().as_deref(), Some(&sd[..]));
        assert_eq!(r.vfs.security(&d.handle).unwrap(), None);
        assert_eq!(r.vfs.dir_security(&Identity::Server, "d").unwrap(), None);
        r.vfs.set_security(&d.handle, b"dir sd").unwrap();
        r.vfs.set_security(&d.handle, b"dir sd 2").unwrap();
        let got = r.vfs.dir_security(&Identity::Server, "d");
        r.outcome("dir_security d", &got, |v| format!("{v:?}"));
        let (dir_sd, owner) = got.unwrap().unwrap();
        assert_eq!(dir_sd, b"dir sd 2");
        assert_eq!(owner, r.vfs.stat(&d.handle).unwrap().uid);
        assert_eq!(r.vfs.dir_security(&Identity::Server, "").unwrap(), None);
        assert_eq!(
            r.vfs.dir_security(&Identity::Server, "d/sub").unwrap(),
            None
        );
        // dir_security takes real paths: no case folding.
        let cases: [(&str, &str); 5] = [
            ("D", "NameNotFound"),
            ("missing", "NameNotFound"),
            ("missing/x", "NameNotFound"),
            ("f", "PathNotFound"),
            ("f/x", "PathNotFound"),
        ];
        for (path, want) in cases {
            let got = r.vfs.dir_security(&Identity::Server, path);
            r.fails(&format!("dir_security {path}"), got, want);
        }
        // A stream handle reaches its object's descriptor.
        let (s, _) = r.vfs.open_stream(&f.handle, "s", Create).unwrap();
        assert_eq!(r.vfs.security(&s).unwrap().as_deref(), Some(&sd[..]));
        // Kept across a rename and an overwrite.
        r.vfs.rename(&Identity::Server, "f", "g", false).unwrap();
        let g = r.open("g", Overwrite, Kind::Any).unwrap();
        assert_eq!(r.vfs.security(&g.handle).unwrap().as_deref(), Some(&sd[..]));
        let too_big = r.vfs.set_security(&g.handle, &vec![0; 65537]);
        r.fails("a descriptor past 64 KiB", too_big, "DiskFull");
    });
}

#[test]
fn fs_stat_describes_a_filesystem() {
    on_both(|r| {
        let st = r.vfs.fs_stat().unwrap();
        r.note("max_name_len", st.max_name_len);
        assert!(st.block_size > 0);
        assert!(st.total_blocks > 0);
        assert!(st.free_blocks >= st.avail_blocks);
        assert!(st.total_blocks >= st.free_blocks);
        assert_eq!(st.max_name_len, 255);
    });
}

/// Each backend refuses the other's handles, as a descriptor that is not
/// open, on every call that takes one.
#[test]
fn handles_of_the_other_backend_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let posix = PosixVfs::new(tmp.path()).unwrap();
    let memory = MemoryVfs::new();
    let p = posix.open(&req("f", Create, Kind::Any)).unwrap();
    let m = memory.open(&req("f", Create, Kind::Any)).unwrap();
    assert!(p.handle.fd().is_some());
    assert!(m.handle.fd().is_none());
    assert!(posix.data_fd(&p.handle).is_some());
    assert!(posix.data_fd(&m.handle).is_none());
    assert!(memory.data_fd(&m.handle).is_none());
    for (vfs, h) in [(&posix as &dyn Vfs, &m.handle), (&memory, &p.handle)] {
        let refused = |r: VfsResult<()>| {
            let e = r.expect_err("a foreign handle was taken");
            assert_eq!(error_name(&e), "Io(9)");
        };
        let mut buf = [0u8; 4];
        refused(vfs.stat(h).map(drop));
        refused(vfs.read(h, 0, &mut buf).map(drop));
        refused(vfs.write(h, 0, b"x"));
        refused(vfs.flush(h));
        refused(vfs.set_len(h, 0));
        refused(vfs.set_allocation(h, 1 << 20));
        refused(vfs.set_times(h, &SetTimes::default()));
        refused(vfs.set_attributes(h, 0));
        refused(vfs.list_names(h).map(drop));
        refused(vfs.entry(h, "x").map(drop));
        refused(vfs.is_empty_dir(h).map(drop));
        refused(vfs.read_dir(h).map(drop));
        refused(vfs.security(h).map(drop));
        refused(vfs.set_security(h, b"sd"));
        refused(vfs.open_stream(h, "s", OpenIf).map(drop));
        refused(vfs.streams(h).map(drop));
    }
}
