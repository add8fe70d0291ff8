//! `[homes]`: a user who logs on has a home folder from then on, as
//! pam_mkhomedir makes one at a login; failed logons and
//! re-authentications ask for none. (Guests and anonymous sessions have
//! no home either; the scripted client cannot log on as one.)

use std::sync::{Arc, Mutex};

use copyless_core::{HomeShares, Server, Share};
use copyless_scripted::{Client, Dialect, Users};
use copyless_vfs::Identity;

/// Records whose home is asked for; makes none.
#[derive(Default)]
struct Recorded(Mutex<Vec<String>>);

impl HomeShares for Recorded {
    fn comment(&self) -> String {
        String::new()
    }

    fn offered_to(&self, _user: &str, _who: &Identity) -> bool {
        true
    }

    fn home(&self, _server: &Server, user: &str, _who: &Identity) -> Option<(usize, Arc<Share>)> {
        self.0.lock().unwrap().push(user.to_string());
        None
    }
}

#[test]
fn a_logon_makes_the_user_s_home_and_nothing_else_does() {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    users.add("bob", "bob-pw");
    let (server, _) = copyless_scripted::memory_server(copyless_scripted::config(), users);
    let homes = Arc::new(Recorded::default());
    server.set_homes(homes.clone());
    let asked = || homes.0.lock().unwrap().clone();

    let mut alice = Client::negotiated(server.clone(), Dialect::Smb311);
    alice.session_setup("alice", "alice-pw").unwrap();
    assert_eq!(asked(), ["alice"]);
    alice.reauthenticate("alice", "alice-pw").unwrap();
    assert_eq!(asked(), ["alice"]);

    let mut bob = Client::negotiated(server, Dialect::Smb311);
    assert!(bob.session_setup("bob", "wrong").is_err());
    assert_eq!(asked(), ["alice"]);
    bob.session_setup("bob", "bob-pw").unwrap();
    assert_eq!(asked(), ["alice", "bob"]);
}
