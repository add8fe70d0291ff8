//! Every SESSION_SETUP that ends is reported to the engine as a logon
//! event, with who the client said it was, from where, how, and the
//! status.

use std::sync::Arc;

use copyless_core::logon::{Kind, Logon, Mechanism, Outcome};
use copyless_core::{Event, Server};
use copyless_proto::status;
use copyless_scripted::{config, memory_server, Client, Dialect, Users};

fn users() -> Arc<Users> {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    users
}

fn server() -> Arc<Server> {
    memory_server(config(), users()).0
}

fn logons(client: &mut Client) -> Vec<Logon> {
    std::mem::take(&mut client.events)
        .into_iter()
        .filter_map(|e| match e {
            Event::Logon(l) => Some(l),
            Event::Audit(_) => None,
        })
        .collect()
}

#[test]
fn a_wrong_password_is_reported_with_the_user_and_the_client() {
    let mut c = Client::connect_from(server(), "192.0.2.7:50122".parse().unwrap());
    c.negotiate();
    assert_eq!(
        c.session_setup("mallory", "guess"),
        Err(status::LOGON_FAILURE)
    );
    assert_eq!(
        logons(&mut c),
        [Logon {
            client: "192.0.2.7:50122".parse().unwrap(),
            user: "mallory".into(),
            // The scripted client names the server's domain, as smbclient does.
            domain: "TEST".into(),
            mechanism: Mechanism::Ntlm,
            kind: Kind::New,
            status: status::LOGON_FAILURE,
        }]
    );
    assert_eq!(
        c.session_setup("alice", "wrong"),
        Err(status::LOGON_FAILURE)
    );
    let failed = logons(&mut c);
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].user, "alice");
    assert_eq!(failed[0].outcome(), Outcome::BadCredentials);
    assert_eq!(
        failed[0].to_string(),
        "logon failed user=\"alice\" domain=\"TEST\" client=192.0.2.7:50122 mech=ntlm kind=new \
         status=STATUS_LOGON_FAILURE code=0xc000006d"
    );
}

#[test]
fn a_logon_is_reported_once_when_it_ends_and_reauth_and_bind_say_so() {
    let server = server();
    let mut home = Client::negotiated(server.clone(), Dialect::Smb311);
    home.session_setup("alice", "alice-pw").unwrap();
    // Two rounds of NTLM, one event: the first round did not end it.
    let ok = logons(&mut home);
    assert_eq!(ok.len(), 1, "{ok:?}");
    assert_eq!(
        (ok[0].kind, ok[0].status, ok[0].outcome()),
        (Kind::New, status::SUCCESS, Outcome::Success)
    );
    assert!(ok[0].to_string().starts_with("logon ok user=\"alice\" "));

    home.reauthenticate("alice", "alice-pw").unwrap();
    let again = logons(&mut home);
    assert_eq!(
        again.iter().map(|l| (l.kind, l.status)).collect::<Vec<_>>(),
        [(Kind::Reauth, status::SUCCESS)]
    );

    let mut channel = Client::negotiated(server, Dialect::Smb311);
    assert_eq!(
        channel.bind(&home, "alice", "wrong"),
        Err(status::LOGON_FAILURE)
    );
    channel.bind(&home, "alice", "alice-pw").unwrap();
    assert_eq!(
        logons(&mut channel)
            .iter()
            .map(|l| (l.kind, l.user.as_str(), l.status))
            .collect::<Vec<_>>(),
        [
            (Kind::Bind, "alice", status::LOGON_FAILURE),
            (Kind::Bind, "alice", status::SUCCESS)
        ]
    );
}

#[test]
fn a_token_that_names_no_mechanism_is_a_failure_of_unknown_mechanism() {
    let mut c = Client::connect(server());
    c.negotiate();
    assert_eq!(
        c.session_setup_token(b"not a token", &[0; 16]),
        Err(status::INVALID_PARAMETER)
    );
    let failed = logons(&mut c);
    assert_eq!(failed.len(), 1);
    assert_eq!(
        (
            failed[0].mechanism,
            failed[0].user.as_str(),
            failed[0].outcome()
        ),
        (Mechanism::Unknown, "", Outcome::Failed)
    );
}
