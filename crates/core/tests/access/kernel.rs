//! The whole core, driven by scripted clients, on a real filesystem
//! through PosixVfs, each session acting as its own Unix account: what
//! the reference says of a random scene must be what the server answers
//! and what it leaves on disk. Run as root (as CI is) the scenes have
//! three people and any owners; otherwise everything belongs to whoever
//! runs the test, and only modes, descriptors and requests vary.
//!
//! The core changes the identity of the thread it runs on, so the clients
//! run on a thread of their own and the scenes are laid out, looked at and
//! cleared on the test's thread, which stays who it was.

use std::os::unix::fs::{chown, PermissionsExt};
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

use copyless_core::ShareAccess;
use copyless_proto::client as wire;
use copyless_proto::create_context as cc;
use copyless_proto::{command, status};
use copyless_scripted::{config, create_request_from, shares_over, Client, Request, Users};
use copyless_vfs::posix::PosixVfs;
use copyless_vfs::{attr, Disposition, Identity, Kind, OpenRequest, Vfs};

use crate::generate::{self, Rng};
use crate::reference::{self as model, Expect, Node, Open, Person, Scene};

const DATA: &[u8] = b"data";
const STREAM_DATA: &[u8] = b"sd";

/// What the clients' thread is asked to do.
struct Job {
    /// Index of the person who asks.
    who: usize,
    read_only_share: bool,
    /// As the client names it.
    name: String,
    open: Open,
    /// Another open to hold first, by a session acting as root.
    other: Option<(u32, u32)>,
}

/// What it saw: whether the other open was held, and the CREATE's status,
/// granted access (FileAccessInformation) and MxAc.
struct Seen {
    other_held: bool,
    status: u32,
    granted: u32,
    maximal: Option<u32>,
}

fn name(p: usize) -> String {
    format!("user{p}")
}

fn server_for(
    dir: &Path,
    vfs: Arc<PosixVfs>,
    people: &[Person],
    root: bool,
) -> Arc<copyless_core::Server> {
    let users = Arc::new(Users::default());
    for (i, p) in people.iter().enumerate() {
        users.add(&name(i), "pw");
        if root {
            users.link(&name(i), p.uid, p.gid, p.groups.clone());
        }
    }
    users.add("admin", "pw");
    if root {
        users.link("admin", 0, 0, vec![0]);
    }
    let mut config = config();
    config.act_as_users = root;
    config.unix_uid = rustix::process::geteuid().as_raw();
    config.unix_gid = rustix::process::getegid().as_raw();
    shares_over(
        vfs,
        &dir.display().to_string(),
        config,
        users,
        &[
            ("share", false, ShareAccess::default()),
            ("ro", true, ShareAccess::default()),
        ],
    )
}

/// A client logged on as `user`, with a tree connect to each share.
fn client(server: &Arc<copyless_core::Server>, user: &str) -> (Client, u32, u32) {
    let mut c = Client::login(server.clone(), user, "pw");
    assert_eq!(c.tree_connect("ro"), status::SUCCESS);
    let ro = c.tree_id;
    assert_eq!(c.tree_connect("share"), status::SUCCESS);
    let rw = c.tree_id;
    (c, rw, ro)
}

fn create(c: &mut Client, name: &str, open: &Open) -> copyless_scripted::Reply {
    let contexts = if open.mxac {
        cc::build_chain(&[(cc::MXAC, Vec::new())])
    } else {
        Vec::new()
    };
    c.call(create_request_from(&wire::CreateParams {
        oplock_level: 0,
        desired_access: open.desired,
        file_attributes: 0,
        share_access: open.share,
        disposition: open.disposition,
        options: 0,
        name,
        contexts: &contexts,
    }))
}

fn close(c: &mut Client, id: copyless_proto::messages::FileId) {
    let r = c.call(Request::new(command::CLOSE, 1, |w| {
        wire::write_close_request(w, 0, id)
    }));
    assert_eq!(r.status(), status::SUCCESS);
}

/// Runs the jobs, on this thread, until the channel closes.
fn clients(
    server: Arc<copyless_core::Server>,
    people: usize,
    jobs: mpsc::Receiver<Job>,
    seen: mpsc::Sender<Seen>,
) {
    let mut sessions: Vec<_> = (0..people).map(|p| client(&server, &name(p))).collect();
    let (mut admin, admin_rw, admin_ro) = client(&server, "admin");
    for job in jobs {
        let admin_tree = if job.read_only_share {
            admin_ro
        } else {
            admin_rw
        };
        admin.tree_id = admin_tree;
        let other = job.other.and_then(|(access, share)| {
            let hold = Open {
                desired: access,
                disposition: model::OPEN,
                share,
                mxac: false,
            };
            let r = create(&mut admin, &job.name, &hold);
            (r.status() == status::SUCCESS)
                .then(|| wire::CreateReply::parse(&r.msg).unwrap().file_id)
        });
        let (c, rw, ro) = &mut sessions[job.who];
        c.tree_id = if job.read_only_share { *ro } else { *rw };
        let r = create(c, &job.name, &job.open);
        let mut out = Seen {
            other_held: other.is_some(),
            status: r.status(),
            granted: 0,
            maximal: None,
        };
        if r.status() == status::SUCCESS {
            let reply = wire::CreateReply::parse(&r.msg).unwrap();
            out.maximal = cc::parse_chain(reply.contexts)
                .unwrap()
                .iter()
                .find(|x| x.name == cc::MXAC)
                .map(|x| u32::from_le_bytes(x.data[4..8].try_into().unwrap()));
            let q = c.call(Request::new(command::QUERY_INFO, 1, |w| {
                wire::write_query_info_request(w, 1, 8, 64, 0, 0, reply.file_id)
            }));
            assert_eq!(q.status(), status::SUCCESS, "FileAccessInformation");
            let data = wire::buffer_response_data(&q.msg).unwrap();
            out.granted = u32::from_le_bytes(data[..4].try_into().unwrap());
            close(c, reply.file_id);
        }
        if let Some(id) = other {
            close(&mut admin, id);
        }
        seen.send(out).unwrap();
    }
}

fn open_as_server(vfs: &PosixVfs, path: &str) -> copyless_vfs::Opened {
    vfs.open(&OpenRequest {
        who: &Identity::Server,
        path,
        disposition: Disposition::Open,
        kind: Kind::Any,
        read: false,
        write: false,
        attributes: 0,
        allocation_size: 0,
    })
    .unwrap_or_else(|e| panic!("open {path}: {e}"))
}

/// Gives `path` its descriptor, read-only mark, owner and mode.
fn dress(vfs: &PosixVfs, dir: &Path, path: &str, node: &Node) {
    let h = open_as_server(vfs, path);
    if let Some(sd) = &node.sd {
        let raw = crate::descriptor(sd).encode(copyless_fscc::descriptor::ALL_PARTS);
        vfs.set_security(&h.handle, &raw).unwrap();
    }
    if node.read_only {
        vfs.set_attributes(&h.handle, attr::READONLY).unwrap();
    }
    let full = dir.join(path);
    chown(&full, Some(node.uid), Some(node.gid)).unwrap();
    std::fs::set_permissions(&full, std::fs::Permissions::from_mode(node.mode)).unwrap();
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

#[test]
fn creates_agree_with_the_reference_on_a_real_filesystem() {
    let cases: u64 = std::env::var("COPYLESS_ACCESS_KERNEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let root = rustix::process::geteuid().is_root();
    let people = generate::people(root);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vfs = Arc::new(PosixVfs::new(dir).unwrap());
    let server = server_for(dir, vfs.clone(), &people, root);
    let (job_tx, job_rx) = mpsc::channel();
    let (seen_tx, seen_rx) = mpsc::channel();
    let count = people.len();
    let worker = std::thread::spawn(move || clients(server, count, job_rx, seen_tx));
    let mut rng = Rng::new(0x5EED_0001);
    let mut opened = 0;
    for case in 0..cases {
        let (mut scene, open) = generate::scene(&mut rng, &people, root);
        let object = lay_out(&vfs, dir, case, &scene);
        let name = match scene.stream {
            Some(_) => format!("{}:s", object.replace('/', "\\")),
            None => object.replace('/', "\\"),
        };
        let who = people.iter().position(|p| p.uid == scene.who.uid).unwrap();
        job_tx
            .send(Job {
                who,
                read_only_share: scene.read_only_share,
                name,
                open: open.clone(),
                other: scene.other,
            })
            .unwrap();
        let seen = seen_rx.recv().unwrap();
        if !seen.other_held {
            scene.other = None;
        }
        let got = if seen.status == status::SUCCESS {
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
        if !matches!(
            want,
            Expect::Opened {
                truncated: true,
                ..
            }
        ) && scene.stream.is_none()
            && !scene.is_dir
        {
            assert_eq!(
                std::fs::read(dir.join(&object)).unwrap(),
                DATA,
                "case {case}"
            );
        }
        std::fs::remove_dir_all(dir.join(format!("c{case}"))).unwrap();
    }
    drop(job_tx);
    worker.join().unwrap();
    assert!(
        opened > cases / 10 && opened < cases * 9 / 10,
        "{opened} of {cases} opened"
    );
    eprintln!("{cases} CREATEs agree ({opened} opened)");
}

/// FileRenameInformation (MS-FSCC 2.4.42), replacing.
fn rename_info(target: &str) -> Vec<u8> {
    let name: Vec<u8> = target.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let mut b = vec![1, 0, 0, 0, 0, 0, 0, 0];
    b.extend_from_slice(&0u64.to_le_bytes());
    b.extend_from_slice(&(name.len() as u32).to_le_bytes());
    b.extend_from_slice(&name);
    b
}

/// One SET_INFO on an open made with `desired`, by `who`: the CREATE's
/// status when it failed, else the SET_INFO's.
fn open_and_set(
    c: &mut Client,
    name: &str,
    desired: u32,
    info_type: u8,
    class: u8,
    extra: u32,
    buf: &[u8],
) -> u32 {
    let open = Open {
        desired,
        disposition: model::OPEN,
        share: 7,
        mxac: false,
    };
    let r = create(c, name, &open);
    if r.status() != status::SUCCESS {
        return r.status();
    }
    let id = wire::CreateReply::parse(&r.msg).unwrap().file_id;
    let s = c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, info_type, class, extra, id, buf).unwrap()
    }));
    close(c, id);
    s.status()
}

/// Runs `check(case, client)` for each case on a thread of clients.
fn with_clients(
    root: bool,
    people: &[Person],
    dir: &Path,
    vfs: Arc<PosixVfs>,
    mut each: impl FnMut(
        u64,
        &mpsc::Sender<Box<dyn FnOnce(&mut [Client]) -> u32 + Send>>,
        &mpsc::Receiver<u32>,
    ),
    cases: u64,
) {
    let server = server_for(dir, vfs, people, root);
    let count = people.len();
    let (job_tx, job_rx) = mpsc::channel::<Box<dyn FnOnce(&mut [Client]) -> u32 + Send>>();
    let (seen_tx, seen_rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let mut clients: Vec<Client> = (0..count).map(|p| client(&server, &name(p)).0).collect();
        for job in job_rx {
            seen_tx.send(job(&mut clients)).unwrap();
        }
    });
    for case in 0..cases {
        each(case, &job_tx, &seen_rx);
    }
    drop(job_tx);
    worker.join().unwrap();
}

fn cases(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn renames_agree_with_the_reference_on_a_real_filesystem() {
    let root = rustix::process::geteuid().is_root();
    let people = generate::people(root);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vfs = Arc::new(PosixVfs::new(&dir).unwrap());
    let mut rng = Rng::new(0x5EED_0002);
    let mut renamed = 0;
    let total = cases("COPYLESS_ACCESS_KERNEL_CASES", 2000);
    let (v, d, ps) = (vfs.clone(), dir.clone(), people.clone());
    with_clients(
        root,
        &people,
        &dir,
        vfs,
        |case, jobs, seen| {
            let who = rng.below(ps.len() as u64) as usize;
            let person = ps[who].clone();
            let from = generate::node(&mut rng, &ps, true, 25);
            let to = generate::node(&mut rng, &ps, true, 35);
            let target = rng
                .chance(50)
                .then(|| generate::node(&mut rng, &ps, false, 40));
            let (a, b) = (format!("a{case}"), format!("b{case}"));
            for f in [&a, &b] {
                std::fs::create_dir(d.join(f)).unwrap();
            }
            std::fs::write(d.join(&a).join("f"), DATA).unwrap();
            chown(d.join(&a).join("f"), Some(person.uid), Some(person.gid)).unwrap();
            if let Some(t) = &target {
                std::fs::write(d.join(&b).join("t"), b"old").unwrap();
                dress(&v, &d, &format!("{b}/t"), t);
            }
            dress(&v, &d, &a, &from);
            dress(&v, &d, &b, &to);
            let (source, info) = (format!("{a}\\f"), rename_info(&format!("{b}\\t")));
            jobs.send(Box::new(move |clients: &mut [Client]| {
                open_and_set(&mut clients[who], &source, model::DELETE, 1, 10, 0, &info)
            }))
            .unwrap();
            let got = seen.recv().unwrap();
            let want = model::rename(&person, &from, &to, target.as_ref());
            let moved = std::fs::read(d.join(&b).join("t")).ok().as_deref() == Some(DATA);
            assert_eq!(
                (got == status::SUCCESS, got, moved),
                (
                    want.is_ok(),
                    want.err().unwrap_or(status::SUCCESS),
                    want.is_ok()
                ),
                "case {case}: {person:?}\nfrom {from:#?}\nto {to:#?}\ntarget {target:#?}"
            );
            renamed += u64::from(moved);
            for f in [&a, &b] {
                std::fs::remove_dir_all(d.join(f)).unwrap();
            }
        },
        total,
    );
    assert!(
        renamed > total / 10 && renamed < total * 9 / 10,
        "{renamed} of {total} renamed"
    );
    eprintln!("{total} renames agree ({renamed} renamed)");
}

#[test]
fn owner_changes_agree_with_the_reference_on_a_real_filesystem() {
    use crate::reference::Sid;
    let root = rustix::process::geteuid().is_root();
    let people = generate::people(root);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let vfs = Arc::new(PosixVfs::new(&dir).unwrap());
    let mut rng = Rng::new(0x5EED_0003);
    let mut changed = 0;
    let total = cases("COPYLESS_ACCESS_KERNEL_CASES", 2000);
    let (v, d, ps) = (vfs.clone(), dir.clone(), people.clone());
    with_clients(
        root,
        &people,
        &dir,
        vfs,
        |case, jobs, seen| {
            let who = rng.below(ps.len() as u64) as usize;
            let person = ps[who].clone();
            let parent = generate::node(&mut rng, &ps, true, 20);
            let mut object = generate::node(&mut rng, &ps, false, 40);
            if rng.chance(50) {
                object.uid = person.uid;
            }
            let other = rng.pick(&ps);
            let new_owner = rng.pick(&[
                Sid::User(person.uid),
                Sid::Group(person.gid),
                Sid::Group(generate::FAMILY),
                Sid::User(other.uid),
                Sid::User(object.uid),
                Sid::Everyone,
            ]);
            let folder = format!("c{case}");
            std::fs::create_dir(d.join(&folder)).unwrap();
            std::fs::write(d.join(&folder).join("o"), DATA).unwrap();
            let path = format!("{folder}/o");
            dress(&v, &d, &path, &object);
            dress(&v, &d, &folder, &parent);
            let sd = copyless_fscc::descriptor::Descriptor {
                control: 0x8000,
                owner: Some(crate::sid(new_owner)),
                ..Default::default()
            }
            .encode(copyless_fscc::descriptor::ALL_PARTS);
            let name = path.replace('/', "\\");
            jobs.send(Box::new(move |clients: &mut [Client]| {
                open_and_set(&mut clients[who], &name, model::WRITE_OWNER, 3, 0, 1, &sd)
            }))
            .unwrap();
            let got = seen.recv().unwrap();
            let want = model::set_owner(&person, &parent, &object, new_owner);
            let h = open_as_server(&v, &path);
            let stored = v.security(&h.handle).unwrap().map(|raw| {
                copyless_fscc::descriptor::Descriptor::parse(&raw)
                    .unwrap()
                    .owner
            });
            let now_owner = stored.flatten();
            let set = now_owner.as_deref() == Some(&crate::sid(new_owner)[..]);
            let before = object.sd.as_ref().and_then(|sd| sd.owner).map(crate::sid);
            assert_eq!(
                (got, set || now_owner == before),
                (want.err().unwrap_or(status::SUCCESS), true),
                "case {case}: {person:?} -> {new_owner:?}\nparent {parent:#?}\nobject {object:#?}"
            );
            if want.is_ok() {
                assert!(set, "case {case}: owner not stored");
                changed += 1;
            } else {
                assert_eq!(
                    now_owner, before,
                    "case {case}: owner changed though refused"
                );
            }
            std::fs::remove_dir_all(d.join(&folder)).unwrap();
        },
        total,
    );
    assert!(
        changed > total / 10 && changed < total * 9 / 10,
        "{changed} of {total} changed"
    );
    eprintln!("{total} owner changes agree ({changed} changed)");
}
