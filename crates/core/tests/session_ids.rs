//! A request naming a session the connection does not have fails with
//! STATUS_USER_SESSION_DELETED (MS-SMB2 3.3.5.2.9), and the connection
//! goes on: smbtorture's smb2.session-id and smb2.tcon.

use std::sync::Arc;

use copyless_proto::status;
use copyless_scripted::{Client, Users};

#[test]
fn a_request_on_a_session_that_is_not_there_is_refused_and_the_connection_goes_on() {
    let users = Arc::new(Users::default());
    users.add("alice", "pw");
    let (server, _vfs) = copyless_scripted::memory_server(copyless_scripted::config(), users);
    let mut c = Client::login(server, "alice", "pw");
    let id = c.create("sessid.tst", false).unwrap();
    let own = c.session_id;
    for wrong in [own + 1, own + 1234] {
        c.session_id = wrong;
        let r = c.call(copyless_scripted::read_request(id, 0, 4, 1));
        assert_eq!(
            r.status(),
            status::USER_SESSION_DELETED,
            "session {wrong:#x}"
        );
        // Marked signed, as the request was, or a client that requires
        // signed replies would drop the connection instead.
        assert!(r.header.is_signed());
        assert!(!c.closed);
    }
    c.session_id = own;
    assert_eq!(c.close(id), status::SUCCESS);
}
