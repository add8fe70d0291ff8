//! The scenes (scenes.rs) tried on the whole core, driven by scripted
//! clients, on a real filesystem through PosixVfs, each session acting as
//! its own Unix account.
//!
//! The core changes the identity of the thread it runs on, so the clients
//! run on a thread of their own and the scenes are laid out, looked at and
//! cleared on the test's thread, which stays who it was.

use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

use copyless_core::ShareAccess;
use copyless_proto::client as wire;
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{config, create_request_from, shares_over, Client, Request, Users};
use copyless_vfs::posix::PosixVfs;

use crate::generate;
use crate::reference::{self as model, Open, Person};
use crate::scenes::{self, cases, Asker, Seen};

fn name(p: usize) -> String {
    format!("user{p}")
}

/// The server: a share and a read-only share over `dir`, and a user acting
/// as each person.
fn server_for(dir: &Path, people: &[Person], root: bool) -> Arc<copyless_core::Server> {
    let users = Arc::new(Users::default());
    for (i, p) in people.iter().enumerate() {
        users.add(&name(i), "pw");
        if root {
            users.link(&name(i), p.uid, p.gid, p.groups.clone());
        }
    }
    let mut config = config();
    config.act_as_users = root;
    config.unix_uid = rustix::process::geteuid().as_raw();
    config.unix_gid = rustix::process::getegid().as_raw();
    shares_over(
        Arc::new(PosixVfs::new(dir).unwrap()),
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
    let contexts = scenes::create_contexts(open);
    c.call(create_request_from(&scenes::create_params(
        name, open, &contexts,
    )))
}

fn close(c: &mut Client, id: FileId) {
    let r = c.call(Request::new(command::CLOSE, 1, |w| {
        wire::write_close_request(w, 0, id)
    }));
    assert_eq!(r.status(), status::SUCCESS);
}

/// Opens `name` asking for `desired` and sends one SET_INFO on it.
fn open_and_set(c: &mut Client, name: &str, desired: u32, info: (u8, u8, u32), buf: &[u8]) -> u32 {
    let r = create(c, name, &scenes::plain_open(desired, 7));
    if r.status() != status::SUCCESS {
        return r.status();
    }
    let id = wire::CreateReply::parse(&r.msg).unwrap().file_id;
    let (info_type, class, extra) = info;
    let s = c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, info_type, class, extra, id, buf).unwrap()
    }));
    close(c, id);
    s.status()
}

/// The sessions: two per person (one to ask, one to keep other opens), on
/// each share.
struct Sessions {
    people: Vec<(Client, u32, u32)>,
    keepers: Vec<(Client, u32, u32)>,
}

impl Sessions {
    fn create(&mut self, job: CreateJob) -> Seen {
        let other = job.other.and_then(|(keeper, access, share)| {
            let (k, rw, ro) = &mut self.keepers[keeper];
            k.tree_id = if job.read_only_share { *ro } else { *rw };
            let r = create(k, &job.name, &scenes::plain_open(access, share));
            (r.status() == status::SUCCESS)
                .then(|| (keeper, wire::CreateReply::parse(&r.msg).unwrap().file_id))
        });
        let (c, rw, ro) = &mut self.people[job.who];
        c.tree_id = if job.read_only_share { *ro } else { *rw };
        let r = create(c, &job.name, &job.open);
        let mut seen = Seen {
            other_held: other.is_some(),
            status: r.status(),
            granted: 0,
            maximal: None,
        };
        if r.status() == status::SUCCESS {
            let reply = wire::CreateReply::parse(&r.msg).unwrap();
            seen.maximal = scenes::maximal_access(reply.contexts);
            let q = c.call(Request::new(command::QUERY_INFO, 1, |w| {
                wire::write_query_info_request(w, 1, 8, 64, 0, 0, reply.file_id)
            }));
            assert_eq!(q.status(), status::SUCCESS, "FileAccessInformation");
            let data = wire::buffer_response_data(&q.msg).unwrap();
            seen.granted = u32::from_le_bytes(data[..4].try_into().unwrap());
            close(c, reply.file_id);
        }
        if let Some((keeper, id)) = other {
            close(&mut self.keepers[keeper].0, id);
        }
        seen
    }

    fn person(&mut self, who: usize) -> &mut Client {
        let (c, rw, _) = &mut self.people[who];
        c.tree_id = *rw;
        c
    }
}

struct CreateJob {
    who: usize,
    read_only_share: bool,
    name: String,
    open: Open,
    other: Option<(usize, u32, u32)>,
}

type Job = Box<dyn FnOnce(&mut Sessions) -> Seen + Send>;

/// The asker: sends each question to the clients' thread.
struct InProcess {
    jobs: mpsc::Sender<Job>,
    answers: mpsc::Receiver<Seen>,
}

impl InProcess {
    fn ask(&mut self, job: Job) -> Seen {
        self.jobs.send(job).unwrap();
        self.answers.recv().unwrap()
    }

    fn status(status: u32) -> Seen {
        Seen {
            other_held: false,
            status,
            granted: 0,
            maximal: None,
        }
    }
}

impl Asker for InProcess {
    fn create(
        &mut self,
        who: usize,
        read_only_share: bool,
        name: &str,
        open: &Open,
        other: Option<(usize, u32, u32)>,
    ) -> Seen {
        let job = CreateJob {
            who,
            read_only_share,
            name: name.to_owned(),
            open: open.clone(),
            other,
        };
        self.ask(Box::new(move |s: &mut Sessions| s.create(job)))
    }

    fn rename(&mut self, who: usize, from: &str, to: &str) -> u32 {
        let (from, info) = (from.to_owned(), scenes::rename_info(to));
        self.ask(Box::new(move |s: &mut Sessions| {
            let c = s.person(who);
            InProcess::status(open_and_set(c, &from, model::DELETE, (1, 10, 0), &info))
        }))
        .status
    }

    fn set_owner(&mut self, who: usize, name: &str, sd: &[u8]) -> u32 {
        let (name, sd) = (name.to_owned(), sd.to_vec());
        self.ask(Box::new(move |s: &mut Sessions| {
            let c = s.person(who);
            InProcess::status(open_and_set(c, &name, model::WRITE_OWNER, (3, 0, 1), &sd))
        }))
        .status
    }
}

/// Runs `each` with an asker whose clients run on a thread of their own.
fn with_server(each: impl FnOnce(&mut dyn Asker, &Path, &[Person])) {
    let root = rustix::process::geteuid().is_root();
    let people = generate::people(root);
    let tmp = tempfile::tempdir().unwrap();
    scenes::prepare(tmp.path());
    let server = server_for(tmp.path(), &people, root);
    let (jobs, job_rx) = mpsc::channel::<Job>();
    let (answer_tx, answers) = mpsc::channel();
    let count = people.len();
    let worker = std::thread::spawn(move || {
        let mut sessions = Sessions {
            people: (0..count).map(|p| client(&server, &name(p))).collect(),
            keepers: (0..count).map(|p| client(&server, &name(p))).collect(),
        };
        for job in job_rx {
            answer_tx.send(job(&mut sessions)).unwrap();
        }
    });
    let mut asker = InProcess { jobs, answers };
    each(&mut asker, tmp.path(), &people);
    drop(asker);
    worker.join().unwrap();
}

const CASES: &str = "COPYLESS_ACCESS_KERNEL_CASES";

#[test]
fn creates_agree_with_the_reference_on_a_real_filesystem() {
    with_server(|asker, dir, people| {
        scenes::creates(asker, dir, people, cases(CASES, 4000), 0x5EED_0001)
    });
}

#[test]
fn renames_agree_with_the_reference_on_a_real_filesystem() {
    with_server(|asker, dir, people| {
        scenes::renames(asker, dir, people, cases(CASES, 2000), 0x5EED_0002)
    });
}

#[test]
fn owner_changes_agree_with_the_reference_on_a_real_filesystem() {
    with_server(|asker, dir, people| {
        scenes::owner_changes(asker, dir, people, cases(CASES, 2000), 0x5EED_0003)
    });
}
