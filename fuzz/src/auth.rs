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

use copyless_auth::{
    Acceptor, ClientIdentity, Initiator, InitiatorRandom, InitiatorStep, ServerInfo, Step,
};
use copyless_scripted::{Users, NOW};

use crate::records;

/// Mode bit: unknown users become guests.
pub const MODE_GUEST: u8 = 0x01;
/// Mode bit: records patch a real client's tokens.
pub const MODE_FROM_CLIENT: u8 = 0x02;

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
    let mut acceptor = Acceptor::new(CHALLENGE, NOW, info, mode & MODE_GUEST != 0);
    if mode & MODE_FROM_CLIENT != 0 {
        patched_client(&mut acceptor, rest, &users);
        return;
    }
    for token in records(rest) {
        match acceptor.step(token, &users) {
            Step::Continue(_) => {}
            Step::Done(done) => {
                assert!(
                    done.anonymous || done.guest,
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
