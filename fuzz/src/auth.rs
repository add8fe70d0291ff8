//! The auth target: SPNEGO and NTLMSSP tokens, as SESSION_SETUP carries
//! them, fed to the acceptor.
//!
//! Input: one mode byte, then records (see [`crate::records`]). Without
//! [`MODE_FROM_CLIENT`] each record is a token sent as it is. With it, a
//! real client authenticates with the right password and each record
//! patches its next token: a little-endian u16 position, then the bytes
//! written there. Either way, only the right password may authenticate a
//! named user: fuzzed tokens may end anonymous or as a guest, and patched
//! ones as the client's own user or not at all.
//!
//! With [`MODE_KERBEROS`] the acceptor also takes Kerberos, with the keys
//! of docs/kerberos, at a time when smbtorture's ticket there is valid;
//! "a real client" is then that captured token, patched by the first
//! record. Only its user, alice, may come out of it, and only alice may
//! come out of a token sent as it is.

use std::sync::Arc;

use copyless_auth::kerberos::KerberosService;
use copyless_auth::{
    Acceptor, ClientIdentity, Initiator, InitiatorRandom, InitiatorStep, ServerInfo, Step,
};
use copyless_scripted::{Users, NOW};

use crate::records;

/// Mode bit: unknown users become guests.
pub const MODE_GUEST: u8 = 0x01;
/// Mode bit: records patch a real client's tokens.
pub const MODE_FROM_CLIENT: u8 = 0x02;
/// Mode bit: the acceptor takes Kerberos too.
pub const MODE_KERBEROS: u8 = 0x04;

const KEYTAB: &[u8] = include_bytes!("../../docs/kerberos/server.keytab");
/// smbtorture's NegTokenInit with an AP-REQ for alice.
pub const KERBEROS_TOKEN: &[u8] = include_bytes!("../../docs/kerberos/smbtorture-negtokeninit.bin");
/// One second after that ticket was issued, as a FILETIME.
const KERBEROS_NOW: u64 = (1_795_535_616 + 1) * 10_000_000 + 116_444_736_000_000_000;

const USER: &str = "alice";
const PASSWORD: &str = "fuzz-pass";
const CHALLENGE: [u8; 8] = [0x11; 8];

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let users = Users::default();
    users.add(USER, PASSWORD);
    let info = ServerInfo {
        netbios_domain: "WORKGROUP".into(),
        netbios_computer: "FUZZ".into(),
        dns_domain: String::new(),
        dns_computer: "fuzz".into(),
    };
    let kerberos = mode & MODE_KERBEROS != 0;
    let now = if kerberos { KERBEROS_NOW } else { NOW };
    let mut acceptor = Acceptor::new(CHALLENGE, now, info, mode & MODE_GUEST != 0);
    if kerberos {
        let keytab = copyless_auth::keytab::parse(KEYTAB).expect("the fixture keytab");
        let service = KerberosService::new(keytab, "COPYLESS.TEST".into(), 5);
        acceptor = acceptor.with_kerberos(Arc::new(service));
    }
    match (kerberos, mode & MODE_FROM_CLIENT != 0) {
        (true, true) => return patched_ticket(&mut acceptor, rest, &users),
        (false, true) => return patched_client(&mut acceptor, rest, &users),
        _ => {}
    }
    for token in records(rest) {
        match acceptor.step(token, &users) {
            Step::Continue(_) => {}
            Step::Done(done) => {
                // The captured ticket is alice's credential: with it (a
                // seed holds it) alice may log on; nobody else may.
                assert!(
                    done.anonymous || done.guest || (kerberos && done.user == "alice"),
                    "{done:?}: a user authenticated by a token nobody computed"
                );
                return;
            }
            Step::Failed(_) => return,
        }
    }
}

fn patched_client(acceptor: &mut Acceptor, patches: &[u8], users: &Users) {
    let identity = ClientIdentity {
        user: USER.into(),
        domain: String::new(),
        password: PASSWORD.into(),
        workstation: "FUZZ".into(),
    };
    let random = InitiatorRandom {
        client_challenge: [3; 8],
        session_key: [4; 16],
    };
    let mut client = Initiator::new(identity, random, NOW);
    let mut patches = records(patches);
    let mut from_server = Vec::new();
    loop {
        let Ok(InitiatorStep::Send(mut token)) = client.step(&from_server) else {
            return;
        };
        if let Some(p) = patches.next() {
            patch(&mut token, p);
        }
        match acceptor.step(&token, users) {
            Step::Continue(reply) => from_server = reply,
            Step::Done(done) => {
                assert!(
                    done.anonymous || done.guest || done.user.eq_ignore_ascii_case(USER),
                    "{done:?}: authenticated as someone the client did not name"
                );
                return;
            }
            Step::Failed(_) => return,
        }
    }
}

fn patched_ticket(acceptor: &mut Acceptor, patches: &[u8], users: &Users) {
    let mut token = KERBEROS_TOKEN.to_vec();
    if let Some(p) = crate::records(patches).next() {
        patch(&mut token, p);
    }
    if let Step::Done(done) = acceptor.step(&token, users) {
        assert!(
            done.user == "alice" && !done.anonymous && !done.guest,
            "{done:?}: someone else than the ticket's client"
        );
    }
}

/// Writes the patch's bytes at its position (modulo the token's length),
/// growing the token when they run past its end.
fn patch(token: &mut Vec<u8>, p: &[u8]) {
    let Some((at, bytes)) = p.split_first_chunk::<2>() else {
        return;
    };
    let at = usize::from(u16::from_le_bytes(*at)) % (token.len() + 1);
    let end = at + bytes.len();
    if end > token.len() {
        token.resize(end, 0);
    }
    token[at..end].copy_from_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> Users {
        let users = Users::default();
        users.add(USER, PASSWORD);
        users
    }

    fn kerberos_acceptor() -> Acceptor {
        let keytab = copyless_auth::keytab::parse(KEYTAB).unwrap();
        let service = KerberosService::new(keytab, "COPYLESS.TEST".into(), 5);
        Acceptor::new(CHALLENGE, KERBEROS_NOW, ServerInfo::default(), false)
            .with_kerberos(Arc::new(service))
    }

    #[test]
    fn the_captured_ticket_logs_alice_on_and_a_flipped_byte_in_it_does_not() {
        let Step::Done(done) = kerberos_acceptor().step(KERBEROS_TOKEN, &users()) else {
            panic!("the captured token should authenticate");
        };
        assert_eq!(done.user, "alice");
        // A byte of the ticket's ciphertext, near the middle of the token.
        let mut token = KERBEROS_TOKEN.to_vec();
        token[400] ^= 1;
        assert!(matches!(
            kerberos_acceptor().step(&token, &users()),
            Step::Failed(_)
        ));
        // The harness runs both ways without complaint.
        run(&[MODE_KERBEROS | MODE_FROM_CLIENT]);
        run(&[MODE_KERBEROS, 2, 0, 0x60, 0x00]);
        let mut whole = vec![MODE_KERBEROS];
        whole.extend_from_slice(&(KERBEROS_TOKEN.len() as u16).to_le_bytes());
        whole.extend_from_slice(KERBEROS_TOKEN);
        run(&whole);
    }
}
