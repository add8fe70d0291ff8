//! Random scenes laid out on a real filesystem, tried through a server
//! (`Asker`), and what the server answered and left on disk checked
//! against the reference. The same scenes run against the core in
//! process (kernel.rs) and against the real binary over TCP
//! (crates/copyless/tests/access_binary.rs).
//!
//! Run as root the scenes have three people and any owners; otherwise
//! everything belongs to whoever runs them, and only modes, descriptors
//! and requests vary.

use std::os::unix::fs::{chown, PermissionsExt};
use std::path::Path;

use copyless_proto::client::CreateParams;
use copyless_proto::create_context as cc;
use copyless_vfs::posix::PosixVfs;
use copyless_vfs::{attr, Disposition, Identity, Kind, OpenRequest, Vfs};

use crate::generate::{self, Rng};
use crate::reference::{self as model, Expect, Node, Open, Person, Scene, Sid};

pub const DATA: &[u8] = b"data";
pub const STREAM_DATA: &[u8] = b"sd";
const STATUS_SUCCESS: u32 = 0;

/// What a CREATE's answer showed.
pub struct Seen {
    /// The other open the scene asked for was held (its keeper may be
    /// refused it).
    pub other_held: bool,
    pub status: u32,
    /// FileAccessInformation, when the CREATE succeeded.
    pub granted: u32,
    /// MxAc, when asked for and the CREATE succeeded.
    pub maximal: Option<u32>,
}

/// A server the scenes are tried on, with a session for each person
/// (`who` indexes `people`).
pub trait Asker {
    /// A CREATE of `name` (as the client names it) on the share, read-only
    /// or not, after another open (granted, share access) when asked, held
    /// by another session of person `keeper`.
    fn create(
        &mut self,
        who: usize,
        read_only_share: bool,
        name: &str,
        open: &Open,
        other: Option<(usize, u32, u32)>,
    ) -> Seen;
    /// Opens `from` for DELETE and renames it to `to`, replacing: the
    /// CREATE's status when it failed, else the SET_INFO's.
    fn rename(&mut self, who: usize, from: &str, to: &str) -> u32;
    /// Opens `name` for WRITE_OWNER and sets its owner from `sd`.
    fn set_owner(&mut self, who: usize, name: &str, sd: &[u8]) -> u32;
}

/// An OPEN of an existing object asking for `desired`, sharing `share`.
pub fn plain_open(desired: u32, share: u32) -> Open {
    Open {
        desired,
        disposition: model::OPEN,
        share,
        mxac: false,
    }
}

/// The create contexts `open` sends: MxAc when it asks for it.
pub fn create_contexts(open: &Open) -> Vec<u8> {
    if open.mxac {
        cc::build_chain(&[(cc::MXAC, Vec::new())])
    } else {
        Vec::new()
    }
}

/// The CREATE `open` stands for, of `name`, with `contexts`.
pub fn create_params<'a>(name: &'a str, open: &Open, contexts: &'a [u8]) -> CreateParams<'a> {
    CreateParams {
        oplock_level: 0,
        desired_access: open.desired,
        file_attributes: 0,
        share_access: open.share,
        disposition: open.disposition,
        options: 0,
        name,
        contexts,
    }
}

/// What a CREATE reply's MxAc context says, if it holds one.
pub fn maximal_access(reply_contexts: &[u8]) -> Option<u32> {
    cc::parse_chain(reply_contexts)
        .unwrap()
        .iter()
        .find(|x| x.name == cc::MXAC)
        .map(|x| u32::from_le_bytes(x.data[4..8].try_into().unwrap()))
}

/// How many cases: the environment variable, else `default`.
pub fn cases(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// FileRenameInformation (MS-FSCC 2.4.42), replacing.
pub fn rename_info(target: &str) -> Vec<u8> {
    let name: Vec<u8> = target.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut b = vec![1, 0, 0, 0, 0, 0, 0, 0];
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(name.len() as u32).to_le_bytes());
    b.extend_from_slice(&name);
    b
}

fn open_as_server(vfs: &PosixVfs, path: &str) -> copyless_vfs::Opened {
    vfs.open(&OpenRequest::look(&Identity::Server, path, Kind::Any))
        .unwrap_or_else(|e| panic!("open {path}: {e}"))
}

/// Gives `path` its descriptor, read-only mark, owner and mode.
fn dress(vfs: &PosixVfs, dir: &Path, path: &str, node: &Node) {
    let h = open_as_server(vfs, path);
    if let Some(sd) = &node.sd {
        let raw = crate::descriptors::descriptor(sd).encode(copyless_fscc::descriptor::ALL_PARTS);
        vfs.set_security(&h.handle, &raw).unwrap();
    }
    if node.read_only {
        vfs.set_attributes(&h.handle, attr::READONLY).unwrap();
    }
    let full = dir.join(path);
    chown(&full, Some(node.uid), Some(node.gid)).unwrap();
    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(node.mode)).unwrap();
}

/// Marks the share as one where descriptors are stored before a server
/// starts on it: a server reads the marker once, at start.
pub fn prepare(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vfs = PosixVfs::new(dir).unwrap();
    std::fs::write(dir.join(".marked"), b"").unwrap();
    let h = open_as_server(&vfs, ".marked");
    let sd = model::Sd {
        owner: None,
        dacl: model::Dacl::Null,
    };
    let raw = crate::descriptors::descriptor(&sd).encode(copyless_fscc::descriptor::ALL_PARTS);
    vfs.set_security(&h.handle, &raw).unwrap();
}

/// Lays the scene out in folder `c{case}`; returns the object's path.
fn lay_out(vfs: &PosixVfs, dir: &Path, case: u64, scene: &Scene) -> String {
    let folder = format!("c{case}");
    let object = format!("{folder}/o");
    std::fs::create_dir(dir.join(&folder)).unwrap();
    if scene.is_dir {
        std::fs::create_dir(dir.join(&object)).unwrap();
    } else {
        std::fs::write(dir.join(&object), DATA).unwrap();
    }
    if scene.stream == Some(true) {
        let h = open_as_server(vfs, &object);
        let (s, _) = vfs
            .open_stream(&h.handle, "s", Disposition::Create)
            .unwrap();
        vfs.write(&s, 0, STREAM_DATA).unwrap();
    }
    dress(vfs, dir, &object, &scene.object);
    dress(vfs, dir, &folder, &scene.parent);
    object
}

/// Whether the object's data (or its stream) was emptied or made.
fn emptied(vfs: &PosixVfs, dir: &Path, object: &str, scene: &Scene) -> bool {
    match scene.stream {
        None if scene.is_dir => false,
        None => std::fs::metadata(dir.join(object)).unwrap().len() == 0,
        Some(existed) => {
            let h = open_as_server(vfs, object);
            match vfs.open_stream(&h.handle, "s", Disposition::Open) {
                Ok((s, _)) => vfs.stat(&s).unwrap().size == 0 || !existed,
                Err(_) => false,
            }
        }
    }
}

fn index(people: &[Person], who: &Person) -> usize {
    people.iter().position(|p| p.uid == who.uid).unwrap()
}

fn people_by_uid(people: &[Person], uid: u32) -> Person {
    people.iter().find(|p| p.uid == uid).unwrap().clone()
}

/// `cases` CREATEs of random existing objects, a third of them while the
/// object's owner holds another open of it.
pub fn creates(asker: &mut dyn Asker, dir: &Path, people: &[Person], cases: u64, seed: u64) {
    let vfs = PosixVfs::new(dir).unwrap();
    let mut rng = Rng::new(seed);
    let (mut opened, mut violations) = (0, 0);
    for case in 0..cases {
        let (mut scene, open) = generate::scene(&mut rng, people, true);
        let object = lay_out(&vfs, dir, case, &scene);
        let name = match scene.stream {
            Some(_) => format!("{}:s", object.replace('/', "\\")),
            None => object.replace('/', "\\"),
        };
        let who = index(people, &scene.who);
        let keeper = index(people, &people_by_uid(people, scene.object.uid));
        let other = scene.other.map(|(access, share)| (keeper, access, share));
        let seen = asker.create(who, scene.read_only_share, &name, &open, other);
        if !seen.other_held {
            scene.other = None;
        }
        let got = if seen.status == STATUS_SUCCESS {
            opened += 1;
            Expect::Opened {
                granted: seen.granted,
                maximal: seen.maximal,
                truncated: emptied(&vfs, dir, &object, &scene),
            }
        } else {
            Expect::Refused(seen.status)
        };
        let want = model::open(&scene, &open);
        assert_eq!(got, want, "case {case}: {scene:#?}\n{open:#?}");
        violations += u64::from(want == Expect::Refused(model::SHARING_VIOLATION));
        let kept = !matches!(
            want,
            Expect::Opened {
                truncated: true,
                ..
            }
        );
        if kept && scene.stream.is_none() && !scene.is_dir {
            assert_eq!(
                std::fs::read(dir.join(&object)).unwrap(),
                DATA,
                "case {case}"
            );
        }
        std::fs::remove_dir_all(dir.join(format!("c{case}"))).unwrap();
    }
    assert!(
        opened > cases / 10 && opened < cases * 9 / 10,
        "{opened} of {cases} opened"
    );
    // Other opens are held, and their share modes met.
    assert!(violations > cases / 200, "{violations} sharing violations");
    eprintln!("{cases} CREATEs agree ({opened} opened, {violations} sharing violations)");
}

/// `cases` renames of a file of its own by a person, from one folder into
/// another, over a file there half the time.
pub fn renames(asker: &mut dyn Asker, dir: &Path, people: &[Person], cases: u64, seed: u64) {
    let vfs = PosixVfs::new(dir).unwrap();
    let mut rng = Rng::new(seed);
    let mut renamed = 0;
    for case in 0..cases {
        let person = rng.pick(people);
        let from = generate::node(&mut rng, people, true, 25);
        let to = generate::node(&mut rng, people, true, 35);
        let target = rng
            .chance(50)
            .then(|| generate::node(&mut rng, people, false, 40));
        let (a, b) = (format!("a{case}"), format!("b{case}"));
        for f in [&a, &b] {
            std::fs::create_dir(dir.join(f)).unwrap();
        }
        std::fs::write(dir.join(&a).join("f"), DATA).unwrap();
        chown(dir.join(&a).join("f"), Some(person.uid), Some(person.gid)).unwrap();
        if let Some(t) = &target {
            std::fs::write(dir.join(&b).join("t"), b"old").unwrap();
            dress(&vfs, dir, &format!("{b}/t"), t);
        }
        dress(&vfs, dir, &a, &from);
        dress(&vfs, dir, &b, &to);
        let got = asker.rename(
            index(people, &person),
            &format!("{a}\\f"),
            &format!("{b}\\t"),
        );
        let want = model::rename(&person, &from, &to, target.as_ref());
        let moved = std::fs::read(dir.join(&b).join("t")).ok().as_deref() == Some(DATA);
        assert_eq!(
            (got, moved),
            (want.err().unwrap_or(STATUS_SUCCESS), want.is_ok()),
            "case {case}: {person:?}\nfrom {from:#?}\nto {to:#?}\ntarget {target:#?}"
        );
        renamed += u64::from(moved);
        for f in [&a, &b] {
            std::fs::remove_dir_all(dir.join(f)).unwrap();
        }
    }
    assert!(
        renamed > cases / 10 && renamed < cases * 9 / 10,
        "{renamed} of {cases} renamed"
    );
    eprintln!("{cases} renames agree ({renamed} renamed)");
}

/// `cases` owner changes of a file by a person, to themselves, a group,
/// someone else or Everyone.
pub fn owner_changes(asker: &mut dyn Asker, dir: &Path, people: &[Person], cases: u64, seed: u64) {
    let vfs = PosixVfs::new(dir).unwrap();
    let mut rng = Rng::new(seed);
    let mut changed = 0;
    for case in 0..cases {
        let person = rng.pick(people);
        let parent = generate::node(&mut rng, people, true, 20);
        let mut object = generate::node(&mut rng, people, false, 40);
        if rng.chance(50) {
            object.uid = person.uid;
        }
        let other = rng.pick(people);
        let new_owner = rng.pick(&[
            Sid::User(person.uid),
            Sid::Group(person.gid),
            Sid::Group(generate::FAMILY),
            Sid::User(other.uid),
            Sid::User(object.uid),
            Sid::Everyone,
        ]);
        let folder = format!("c{case}");
        std::fs::create_dir(dir.join(&folder)).unwrap();
        std::fs::write(dir.join(&folder).join("o"), DATA).unwrap();
        let path = format!("{folder}/o");
        dress(&vfs, dir, &path, &object);
        dress(&vfs, dir, &folder, &parent);
        let sd = copyless_fscc::descriptor::Descriptor {
            control: 0x8000,
            owner: Some(crate::descriptors::sid(new_owner)),
            ..Default::default()
        }
        .encode(copyless_fscc::descriptor::ALL_PARTS);
        let got = asker.set_owner(index(people, &person), &path.replace('/', "\\"), &sd);
        let want = model::set_owner(&person, &parent, &object, new_owner);
        let h = open_as_server(&vfs, &path);
        let stored = vfs.security(&h.handle).unwrap().and_then(|raw| {
            copyless_fscc::descriptor::Descriptor::parse(&raw)
                .unwrap()
                .owner
        });
        let before = object
            .sd
            .as_ref()
            .and_then(|sd| sd.owner)
            .map(crate::descriptors::sid);
        assert_eq!(
            got,
            want.err().unwrap_or(STATUS_SUCCESS),
            "case {case}: {person:?} -> {new_owner:?}\nparent {parent:#?}\nobject {object:#?}"
        );
        if want.is_ok() {
            assert_eq!(
                stored,
                Some(crate::descriptors::sid(new_owner)),
                "case {case}"
            );
            changed += 1;
        } else {
            assert_eq!(stored, before, "case {case}: owner changed though refused");
        }
        std::fs::remove_dir_all(dir.join(&folder)).unwrap();
    }
    assert!(
        changed > cases / 10 && changed < cases * 9 / 10,
        "{changed} of {cases} changed"
    );
    eprintln!("{cases} owner changes agree ({changed} changed)");
}
