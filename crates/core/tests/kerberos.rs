//! A Kerberos session, logged on with a ticket smbtorture once sent
//! (docs/kerberos), at the times around that ticket's end: it expires
//! when the ticket does (MS-SMB2 3.3.5.2.9), and may then only tidy up
//! until it re-authenticates.

use std::sync::Arc;

use copyless_auth::kerberos::KerberosService;
use copyless_auth::{Acceptor, ServerInfo, Step};
use copyless_proto::client as wire;
use copyless_proto::command;
use copyless_proto::header::FLAG_SIGNED;
use copyless_proto::messages::{
    FileId, LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY, LOCKFLAG_UNLOCK,
};
use copyless_proto::status;
use copyless_scripted::{config, memory_server, Client, Dialect, Reply, Request, Users};

const KEYTAB: &[u8] = include_bytes!("../../../docs/kerberos/server.keytab");
/// smbtorture's SPNEGO NegTokenInit with its AP-REQ for cifs/copyless.
const TOKEN: &[u8] = include_bytes!("../../../docs/kerberos/smbtorture-negtokeninit.bin");
/// When its ticket was issued (Unix time); it ends 4 s later.
const ISSUED: u64 = 1_795_535_616;

fn filetime(unix: u64) -> u64 {
    unix * 10_000_000 + 116_444_736_000_000_000
}

fn service() -> Arc<KerberosService> {
    let keytab = copyless_auth::keytab::parse(KEYTAB).unwrap();
    Arc::new(KerberosService::new(keytab, "COPYLESS.TEST".into(), 5))
}

/// The token's context key, as the client knows it.
fn client_key(users: &Users) -> Vec<u8> {
    let acceptor = Acceptor::new([0; 8], filetime(ISSUED + 1), ServerInfo::default(), false)
        .with_kerberos(service());
    let mut acceptor = acceptor;
    match acceptor.step(TOKEN, users) {
        Step::Done(auth) => auth.full_session_key.to_vec(),
        other => panic!("{other:?}"),
    }
}

/// A server that takes Kerberos and has the user alice, and the key
/// alice's client holds for the captured ticket.
fn kerberos_server() -> (Arc<copyless_core::Server>, Vec<u8>) {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    let mut cfg = config();
    cfg.kerberos = Some(service());
    let key = client_key(&users);
    (memory_server(cfg, users).0, key)
}

fn getinfo(id: FileId) -> Request {
    Request::new(command::QUERY_INFO, 1, |w| {
        wire::write_query_info_request(w, 1, 18, 4096, 0, 0, id)
    })
}

fn lock(id: FileId, flags: u32) -> Request {
    copyless_scripted::lock_request(id, 0, &[(0, 1, flags)])
}

fn signed(c: &Client, r: &Reply) -> bool {
    r.header.flags & FLAG_SIGNED != 0 && c.verifies(&r.msg)
}

#[test]
fn a_kerberos_session_expires_with_its_ticket_until_it_logs_on_again() {
    let (server, key) = kerberos_server();

    let mut c = Client::negotiated(server, Dialect::Smb311);
    c.env.now = filetime(ISSUED + 1);
    c.session_setup_token(TOKEN, &key).unwrap();
    assert_eq!(c.tree_connect("share"), status::SUCCESS);
    let id = c.create("f", false).unwrap();
    assert_eq!(c.call(getinfo(id)).status(), status::SUCCESS);
    let exclusive = LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY;
    assert_eq!(c.call(lock(id, exclusive)).status(), status::SUCCESS);

    // The ticket ended: the work stops, signed as ever.
    c.env.now = filetime(ISSUED + 4);
    for req in [getinfo(id), lock(id, exclusive)] {
        let r = c.call(req);
        assert_eq!(r.status(), status::NETWORK_SESSION_EXPIRED);
        assert!(signed(&c, &r));
    }
    let tcon = Request::new(command::TREE_CONNECT, 1, |w| {
        wire::write_tree_connect_request(w, "\\\\server\\share").unwrap()
    });
    assert_eq!(c.call(tcon).status(), status::NETWORK_SESSION_EXPIRED);
    // What tidies up still runs.
    assert_eq!(c.call(lock(id, LOCKFLAG_UNLOCK)).status(), status::SUCCESS);
    let echo = Request::new(command::ECHO, 1, |w| {
        w.u16(4).u16(0);
    });
    assert_eq!(c.call(echo).status(), status::SUCCESS);
    assert_eq!(c.close(id), status::SUCCESS);

    // Logging on again (here with NTLM, which never expires) renews it:
    // the same session, its tree connect kept.
    let session = c.session_id;
    c.reauthenticate("alice", "alice-pw").unwrap();
    assert_eq!(c.session_id, session);
    c.env.now = filetime(ISSUED + 3600);
    let id = c.create("f", false).unwrap();
    assert_eq!(c.call(getinfo(id)).status(), status::SUCCESS);
}

#[test]
fn a_replayed_ticket_or_one_for_an_unknown_user_is_refused() {
    let (server, key) = kerberos_server();

    let mut c = Client::negotiated(server.clone(), Dialect::Smb311);
    c.env.now = filetime(ISSUED + 1);
    c.session_setup_token(TOKEN, &key).unwrap();
    // The same AP-REQ again, on another connection: a replay.
    let mut thief = Client::negotiated(server, Dialect::Smb311);
    thief.env.now = filetime(ISSUED + 2);
    assert_eq!(
        thief.session_setup_token(TOKEN, &key),
        Err(status::LOGON_FAILURE)
    );

    // A server where alice is no user.
    let mut cfg = config();
    cfg.kerberos = Some(service());
    let (server, _) = memory_server(cfg, Arc::new(Users::default()));
    let mut c = Client::negotiated(server, Dialect::Smb311);
    c.env.now = filetime(ISSUED + 1);
    assert_eq!(
        c.session_setup_token(TOKEN, &key),
        Err(status::LOGON_FAILURE)
    );
}

#[test]
fn kerberos_logons_are_reported_with_the_principal_and_the_realm() {
    use copyless_core::logon::{Kind, Mechanism};
    use copyless_core::Event;

    let (server, key) = kerberos_server();
    let mut c = Client::negotiated(server.clone(), Dialect::Smb311);
    c.env.now = filetime(ISSUED + 1);
    c.session_setup_token(TOKEN, &key).unwrap();
    // The same ticket again: a replay, refused, and said to be Kerberos.
    let mut thief = Client::negotiated(server, Dialect::Smb311);
    thief.env.now = filetime(ISSUED + 2);
    assert_eq!(
        thief.session_setup_token(TOKEN, &key),
        Err(status::LOGON_FAILURE)
    );
    let seen: Vec<_> = c
        .events
        .drain(..)
        .chain(thief.events.drain(..))
        .filter_map(|e| match e {
            Event::Logon(l) => Some((l.user, l.domain, l.mechanism, l.kind, l.status)),
            Event::Audit(_) => None,
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "alice".to_string(),
                "COPYLESS.TEST".to_string(),
                Mechanism::Kerberos,
                Kind::New,
                status::SUCCESS
            ),
            // A replay names its client only inside what was refused.
            (
                String::new(),
                String::new(),
                Mechanism::Kerberos,
                Kind::New,
                status::LOGON_FAILURE
            ),
        ]
    );
}
