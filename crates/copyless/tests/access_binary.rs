//! The access scenes of crates/core/tests/access (CREATEs, renames and
//! owner changes of random objects laid out on disk) tried on the real
//! binary over TCP, by users acting as Unix accounts of their own, each
//! answer checked against the same reference model.
//!
//! As root the test makes the accounts the scenes need (uids 5001-5003,
//! groups 5001-5003 and 5100), as `useradd` would for any NAS user;
//! otherwise every scene belongs to the account it runs as.

#[path = "../../core/tests/access/descriptors.rs"]
#[allow(dead_code)]
mod descriptors;
#[path = "../../core/tests/access/generate.rs"]
mod generate;
#[path = "../../core/tests/access/reference.rs"]
#[allow(dead_code)]
mod reference;
#[path = "../../core/tests/access/scenes.rs"]
mod scenes;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use copyless_bench::client::{connect, ClientOptions, Signing};
use copyless_bench::client::{Connection, Msg};
use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::messages::FileId;

use reference::{Open, Person};
use scenes::{cases, Asker, Seen};

const PASSWORD: &str = "Access-Passw0rd";

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn exists(kind: &str, key: &str) -> bool {
    Command::new("getent")
        .args([kind, key])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The accounts of the scenes' people, made when missing: each in a group
/// of its own number, the first two also in the family group.
fn accounts(people: &[Person]) -> Vec<String> {
    let group_name = |gid: u32| format!("copyless-acg{gid}");
    for gid in people.iter().map(|p| p.gid).chain([generate::FAMILY]) {
        if !exists("group", &gid.to_string()) {
            run(Command::new("groupadd").args(["-g", &gid.to_string(), &group_name(gid)]));
        }
    }
    people
        .iter()
        .map(|p| {
            let name = format!("copyless-acu{}", p.uid);
            if !exists("passwd", &p.uid.to_string()) {
                let extra: Vec<String> = p.groups.iter().map(u32::to_string).collect();
                run(Command::new("useradd").args([
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    "-u",
                    &p.uid.to_string(),
                    "-g",
                    &p.gid.to_string(),
                    "-G",
                    &extra.join(","),
                    &name,
                ]));
            }
            let line = run(Command::new("getent").args(["passwd", &p.uid.to_string()]));
            let account = line.split(':').next().unwrap().to_string();
            // The scenes rely on these numbers: an account of another shape
            // already there would make the model wrong.
            let ids = run(Command::new("id").arg(&account));
            for g in &p.groups {
                assert!(
                    ids.contains(&format!("{g}(")),
                    "{account} is not in group {g}: {ids}"
                );
            }
            account
        })
        .collect()
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(base: &Path, share: &Path, accounts: &[String]) -> Server {
    let bin = env!("CARGO_BIN_EXE_copyless");
    let state = base.join("state");
    for (i, account) in accounts.iter().enumerate() {
        let mut add = Command::new(bin)
            .args(["user", "add", &format!("user{i}"), "--unix-user", account])
            .args(["--password-stdin", "--state-dir"])
            .arg(&state)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        writeln!(add.stdin.take().unwrap(), "{PASSWORD}").unwrap();
        assert!(add.wait().unwrap().success(), "user add {account}");
    }
    let config = base.join("copyless.toml");
    let share = share.display();
    std::fs::write(
        &config,
        format!(
            "listen = [\"127.0.0.1:0\"]\nstate_dir = \"{}\"\n\
             [[share]]\nname = \"share\"\npath = \"{share}\"\n\
             [[share]]\nname = \"ro\"\npath = \"{share}\"\nread_only = true\n",
            state.display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new(bin);
    cmd.arg("serve").arg("--config").arg(&config);
    if let Ok(engine) = std::env::var("COPYLESS_ENGINE") {
        cmd.args(["--engine", &engine]);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port = loop {
        let line = lines.next().expect("copyless serve ended").unwrap();
        if let Some(at) = line.strip_prefix("copyless listening on 127.0.0.1:") {
            break at.parse().unwrap();
        }
    };
    Server { child, port }
}

fn client(port: u16, user: usize, share: &str) -> Connection {
    connect(&ClientOptions {
        address: format!("127.0.0.1:{port}"),
        share: share.into(),
        user: format!("user{user}"),
        password: PASSWORD.into(),
        domain: String::new(),
        signing: Signing::Required,
        encrypt: false,
        max_dialect: 0x0311,
    })
    .unwrap()
}

/// Each person's connections: (asking on the share, on the read-only
/// share), and the same again to keep other opens.
struct OverTcp {
    asking: Vec<(Connection, Connection)>,
    keeping: Vec<(Connection, Connection)>,
}

fn create(c: &mut Connection, name: &str, open: &Open) -> copyless_bench::client::Reply {
    let contexts = scenes::create_contexts(open);
    let mut msg = Msg::new(command::CREATE);
    wire::write_create_request(&mut msg.buf, &scenes::create_params(name, open, &contexts))
        .unwrap();
    c.call(msg).unwrap()
}

fn opened(reply: &copyless_bench::client::Reply) -> Option<FileId> {
    (reply.status() == 0).then(|| wire::CreateReply::parse(&reply.msg).unwrap().file_id)
}

fn close(c: &mut Connection, id: FileId) {
    let mut msg = Msg::new(command::CLOSE);
    wire::write_close_request(&mut msg.buf, 0, id);
    assert_eq!(c.call(msg).unwrap().status(), 0);
}

/// Opens `name` for `desired` and sends one SET_INFO on it.
fn open_and_set(
    c: &mut Connection,
    name: &str,
    desired: u32,
    info: (u8, u8, u32),
    buf: &[u8],
) -> u32 {
    let r = create(c, name, &scenes::plain_open(desired, 7));
    let Some(id) = opened(&r) else {
        return r.status();
    };
    let mut msg = Msg::new(command::SET_INFO);
    wire::write_set_info_request(&mut msg.buf, info.0, info.1, info.2, id, buf).unwrap();
    let status = c.call(msg).unwrap().status();
    close(c, id);
    status
}

fn pick(pair: &mut (Connection, Connection), read_only: bool) -> &mut Connection {
    if read_only {
        &mut pair.1
    } else {
        &mut pair.0
    }
}

impl Asker for OverTcp {
    fn create(
        &mut self,
        who: usize,
        read_only_share: bool,
        name: &str,
        open: &Open,
        other: Option<(usize, u32, u32)>,
    ) -> Seen {
        let held = other.and_then(|(keeper, access, share)| {
            let k = pick(&mut self.keeping[keeper], read_only_share);
            opened(&create(k, name, &scenes::plain_open(access, share))).map(|id| (keeper, id))
        });
        let c = pick(&mut self.asking[who], read_only_share);
        let r = create(c, name, open);
        let mut seen = Seen {
            other_held: held.is_some(),
            status: r.status(),
            granted: 0,
            maximal: None,
        };
        if let Some(id) = opened(&r) {
            let reply = wire::CreateReply::parse(&r.msg).unwrap();
            seen.maximal = scenes::maximal_access(reply.contexts);
            let q = c
                .call(copyless_bench::client::ops::query_info(id, 8, 64))
                .unwrap();
            assert_eq!(q.status(), 0, "FileAccessInformation");
            let data = wire::buffer_response_data(&q.msg).unwrap();
            seen.granted = u32::from_le_bytes(data[..4].try_into().unwrap());
            close(c, id);
        }
        if let Some((keeper, id)) = held {
            close(pick(&mut self.keeping[keeper], read_only_share), id);
        }
        seen
    }

    fn rename(&mut self, who: usize, from: &str, to: &str) -> u32 {
        let info = scenes::rename_info(to);
        open_and_set(
            &mut self.asking[who].0,
            from,
            reference::DELETE,
            (1, 10, 0),
            &info,
        )
    }

    fn set_owner(&mut self, who: usize, name: &str, sd: &[u8]) -> u32 {
        open_and_set(
            &mut self.asking[who].0,
            name,
            reference::WRITE_OWNER,
            (3, 0, 1),
            sd,
        )
    }
}

#[test]
fn the_binary_agrees_with_the_reference() {
    let root = rustix::process::geteuid().is_root();
    let people = generate::people(root);
    let names = if root {
        accounts(&people)
    } else {
        let me = run(Command::new("id").arg("-un"));
        vec![me.trim().to_string()]
    };
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        base.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let share = base.path().join("share");
    std::fs::create_dir(&share).unwrap();
    scenes::prepare(&share);
    let server = start(base.path(), &share, &names);
    let both = |u| {
        (
            client(server.port, u, "share"),
            client(server.port, u, "ro"),
        )
    };
    let mut asker = OverTcp {
        asking: (0..people.len()).map(both).collect(),
        keeping: (0..people.len()).map(both).collect(),
    };
    let n = cases("COPYLESS_ACCESS_BINARY_CASES", 600);
    scenes::creates(&mut asker, &share, &people, n, 0xB1_0001);
    scenes::renames(&mut asker, &share, &people, n / 2, 0xB1_0002);
    scenes::owner_changes(&mut asker, &share, &people, n / 2, 0xB1_0003);
    drop(asker);
    drop(server);
}
