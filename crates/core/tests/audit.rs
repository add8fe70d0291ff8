//! A share's audit trail: the core reports what the share keeps of each
//! request, with the session's user, the client's address, the share and
//! the path, once the request's outcome is known; a share that keeps
//! nothing reports nothing.

use std::sync::Arc;

use copyless_core::audit::{Audit, AuditKind, AuditKinds};
use copyless_core::{Event, Server, Share, ShareAccess};
use copyless_proto::client as wire;
use copyless_proto::messages::FileId;
use copyless_proto::{command, status};
use copyless_scripted::{create_request_with, rename_info, Client, Dialect, Request, Users};
use copyless_vfs::memory::MemoryVfs;

const FILE_RENAME_INFORMATION: u8 = 10;
const FILE_DISPOSITION_INFORMATION: u8 = 13;
const FILE_END_OF_FILE_INFORMATION: u8 = 20;
const INFO_FILE: u8 = 1;

fn share(name: &str, vfs: &Arc<MemoryVfs>, read_only: bool, audit: AuditKinds) -> Share {
    Share {
        name: name.into(),
        vfs: vfs.clone(),
        read_only,
        path: "memory".into(),
        comment: String::new(),
        names: Default::default(),
        owner: None,
        access: ShareAccess::default(),
        audit,
        snapshots: None,
        recycle: None,
    }
}

fn login() -> Client {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let vfs = Arc::new(MemoryVfs::new());
    let kept = [
        AuditKind::Create,
        AuditKind::Write,
        AuditKind::Rename,
        AuditKind::Delete,
        AuditKind::Denied,
    ];
    let shares = vec![
        share("kept", &vfs, false, kept.into_iter().collect()),
        share("quiet", &vfs, false, AuditKinds::NONE),
        share(
            "readonly",
            &vfs,
            true,
            [AuditKind::Denied].into_iter().collect(),
        ),
    ];
    let server = Server::new(copyless_scripted::config(), shares, users);
    let mut c = Client::negotiated(server, Dialect::Smb210);
    c.session_setup("alice", "pw").unwrap();
    c
}

fn audits(c: &mut Client) -> Vec<(AuditKind, String, Option<String>, u32, String)> {
    std::mem::take(&mut c.events)
        .into_iter()
        .filter_map(|e| match e {
            Event::Audit(Audit {
                kind,
                path,
                to,
                status,
                share,
                user,
                ..
            }) => {
                assert_eq!(user, "alice");
                Some((kind, path, to, status, share))
            }
            Event::Logon(_) => None,
        })
        .collect()
}

fn set_info(c: &mut Client, id: FileId, class: u8, buffer: &[u8]) -> u32 {
    c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, INFO_FILE, class, 0, id, buffer).unwrap()
    }))
    .status()
}

fn write(c: &mut Client, id: FileId, data: &[u8]) {
    let r = c.call(Request::new(command::WRITE, 1, |w| {
        wire::write_write_request_head(w, id, 0, data.len() as u32, 0);
        w.bytes(data);
    }));
    assert_eq!(r.status(), status::SUCCESS);
}

/// Opening for read, write and delete; FILE_OPEN_IF.
fn open_all(c: &mut Client, name: &str) -> FileId {
    c.open(create_request_with(name, 0x0013_019f, 7, 3, 0x40))
        .unwrap()
}

#[test]
fn each_change_is_reported_once_its_outcome_is_known() {
    let mut c = login();
    c.tree_connect("kept");
    let id = open_all(&mut c, "a.txt");
    write(&mut c, id, b"one");
    write(&mut c, id, b"two");
    assert_eq!(c.close(id), status::SUCCESS);
    let id = open_all(&mut c, "a.txt");
    let renamed = set_info(
        &mut c,
        id,
        FILE_RENAME_INFORMATION,
        &rename_info("b.txt", false),
    );
    assert_eq!(renamed, status::SUCCESS);
    assert_eq!(
        set_info(
            &mut c,
            id,
            FILE_END_OF_FILE_INFORMATION,
            &1u64.to_le_bytes()
        ),
        0
    );
    assert_eq!(set_info(&mut c, id, FILE_DISPOSITION_INFORMATION, &[1]), 0);
    // Not yet: the file goes at the last close.
    let before_close = audits(&mut c);
    assert_eq!(c.close(id), status::SUCCESS);
    let ok = status::SUCCESS;
    let kept = "kept".to_string();
    assert_eq!(
        before_close,
        [
            (AuditKind::Create, "a.txt".into(), None, ok, kept.clone()),
            // Two writes through one open: one event, at its close.
            (AuditKind::Write, "a.txt".into(), None, ok, kept.clone()),
            (
                AuditKind::Rename,
                "a.txt".into(),
                Some("b.txt".into()),
                ok,
                kept.clone()
            ),
            (AuditKind::Write, "b.txt".into(), None, ok, kept.clone()),
        ]
    );
    assert_eq!(
        audits(&mut c),
        [(AuditKind::Delete, "b.txt".into(), None, ok, kept)]
    );
    // Opening an existing file, a name not found: not kept here.
    let id = open_all(&mut c, "c.txt");
    c.close(id);
    audits(&mut c);
    let id = open_all(&mut c, "c.txt");
    c.close(id);
    assert_eq!(
        c.create("missing\\d.txt", false),
        Err(status::OBJECT_PATH_NOT_FOUND)
    );
    assert_eq!(audits(&mut c), []);
}

#[test]
fn a_share_that_keeps_nothing_reports_nothing_and_refusals_are_kept() {
    let mut c = login();
    c.tree_connect("quiet");
    let id = open_all(&mut c, "q.txt");
    write(&mut c, id, b"data");
    assert_eq!(set_info(&mut c, id, FILE_DISPOSITION_INFORMATION, &[1]), 0);
    assert_eq!(c.close(id), status::SUCCESS);
    assert_eq!(audits(&mut c), []);

    c.tree_connect("readonly");
    assert_eq!(
        c.open(create_request_with("new.txt", 0x0012_019f, 7, 2, 0x40)),
        Err(status::ACCESS_DENIED)
    );
    assert_eq!(
        audits(&mut c),
        [(
            AuditKind::Open,
            "new.txt".into(),
            None,
            status::ACCESS_DENIED,
            "readonly".into()
        )]
    );
}
