//! End-to-end tests of the acceptor against a small NTLM client written here,
//! plus the MS-NLMP 4.2.4 AUTHENTICATE message itself.

use std::path::Path;

use crate::der;
use crate::ntlm::keys::{self, Direction, Signer};
use crate::ntlm::{flags, wire};
use crate::spnego::{self, OID_NTLMSSP};
use crate::{
    nt_hash, Acceptor, AuthError, Authenticated, Claim, Mechanism, ServerInfo, Step, UserStore,
};

const CHALLENGE: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
const NOW: u64 = 0x01d9_0000_1234_5678;
const RANDOM_SESSION_KEY: [u8; 16] = [0x42; 16];
const KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];

/// What Windows 10 and Samba's client ask for.
const CLIENT_FLAGS: u32 = flags::UNICODE
    | flags::OEM
    | flags::REQUEST_TARGET
    | flags::SIGN
    | flags::SEAL
    | flags::NTLM
    | flags::ALWAYS_SIGN
    | flags::EXTENDED_SESSIONSECURITY
    | flags::VERSION
    | flags::NEGOTIATE_128
    | flags::KEY_EXCH
    | flags::NEGOTIATE_56;

fn info() -> ServerInfo {
    ServerInfo {
        netbios_domain: "WORKGROUP".into(),
        netbios_computer: "NAS".into(),
        dns_domain: "example.org".into(),
        dns_computer: "nas.example.org".into(),
    }
}

fn acceptor(allow_guest: bool) -> Acceptor {
    Acceptor::new(CHALLENGE, NOW, info(), allow_guest)
}

fn users() -> UserStore {
    // A store whose file does not exist starts empty and is never written.
    let mut store = UserStore::load(Path::new("/nonexistent/copyless-auth-test")).unwrap();
    store.add("Alice", "Password").unwrap();
    store.add("bob", "hunter2").unwrap();
    store
}

fn negotiate_msg(client_flags: u32) -> Vec<u8> {
    let mut msg = wire::SIGNATURE.to_vec();
    msg.extend_from_slice(&wire::NEGOTIATE.to_le_bytes());
    msg.extend_from_slice(&client_flags.to_le_bytes());
    wire::push_field(&mut msg, 0, 40);
    wire::push_field(&mut msg, 0, 40);
    msg.extend_from_slice(&[10, 0, 0x61, 0x4a, 0, 0, 0, 0x0f]);
    msg
}

/// How the test client builds its AUTHENTICATE.
#[derive(Clone)]
struct Client {
    user: String,
    password: String,
    /// The domain sent in the message.
    domain: String,
    /// The domain used in NTOWFv2, when it differs from the one sent.
    hash_domain: Option<String>,
    flags: u32,
    mic: bool,
    corrupt_mic: bool,
    ntlm_v1: bool,
    bad_pairs: bool,
}

impl Client {
    fn new(user: &str, password: &str) -> Client {
        Client {
            user: user.into(),
            password: password.into(),
            domain: "WORKGROUP".into(),
            hash_domain: None,
            flags: CLIENT_FLAGS,
            mic: true,
            corrupt_mic: false,
            ntlm_v1: false,
            bad_pairs: false,
        }
    }

    /// Builds the AUTHENTICATE for `challenge_msg`; returns it with the
    /// exported session key and the negotiated flags.
    fn authenticate(&self, negotiate: &[u8], challenge_msg: &[u8]) -> (Vec<u8>, [u8; 16], u32) {
        assert_eq!(wire::message_type(challenge_msg), Ok(wire::CHALLENGE));
        let neg_flags = u32::from_le_bytes(challenge_msg[20..24].try_into().unwrap());
        let server_challenge: [u8; 8] = challenge_msg[24..32].try_into().unwrap();
        let info_len = usize::from(u16::from_le_bytes([challenge_msg[40], challenge_msg[41]]));
        let info_off = u32::from_le_bytes(challenge_msg[44..48].try_into().unwrap()) as usize;
        let target_info = &challenge_msg[info_off..info_off + info_len];
        let timestamp = wire::find_av(target_info, wire::av::TIMESTAMP)
            .unwrap()
            .expect("the server sends a timestamp");

        // The client's AV pairs: the server's, plus MsvAvFlags when it sends
        // a MIC, before the EOL.
        let mut pairs = target_info[..target_info.len() - 4].to_vec();
        if self.mic {
            wire::push_av(
                &mut pairs,
                wire::av::FLAGS,
                &wire::AV_FLAG_MIC_PRESENT.to_le_bytes(),
            );
        }
        wire::push_av(&mut pairs, wire::av::EOL, &[]);
        if self.bad_pairs {
            // A pair that claims more bytes than follow (Samba bug 14932,
            // from NetApp's diagnostic tool).
            pairs = vec![0x11, 0xa2, 0x08, 0x81, 0x50, 0x38];
        }

        let mut blob = vec![1, 1, 0, 0, 0, 0, 0, 0];
        blob.extend_from_slice(timestamp);
        blob.extend_from_slice(&[0xaa; 8]);
        blob.extend_from_slice(&[0; 4]);
        blob.extend_from_slice(&pairs);
        blob.extend_from_slice(&[0; 4]);

        let hash_domain = self.hash_domain.as_deref().unwrap_or(&self.domain);
        let ntowf = keys::ntowf_v2(&nt_hash(&self.password), &self.user, hash_domain);
        let proof = keys::nt_proof(&ntowf, &server_challenge, &blob);
        let base = keys::session_base_key(&ntowf, &proof);
        let nt_response = if self.ntlm_v1 {
            vec![0x11; 24]
        } else {
            [proof.as_slice(), &blob].concat()
        };
        let (exported, encrypted) = if neg_flags & flags::KEY_EXCH != 0 {
            (
                RANDOM_SESSION_KEY,
                keys::rc4_16(&base, &RANDOM_SESSION_KEY).to_vec(),
            )
        } else {
            (*base, Vec::new())
        };

        let domain = crate::text::utf16le(&self.domain);
        let user = crate::text::utf16le(&self.user);
        let workstation = crate::text::utf16le("CLIENT");
        let lm = [0u8; 24];
        let payloads: [&[u8]; 6] = [&lm, &nt_response, &domain, &user, &workstation, &encrypted];
        let mut offsets = Vec::new();
        let mut offset = 88;
        for p in payloads {
            offsets.push(offset);
            offset += p.len();
        }

        let mut msg = wire::SIGNATURE.to_vec();
        msg.extend_from_slice(&wire::AUTHENTICATE.to_le_bytes());
        for (p, off) in payloads.iter().zip(&offsets) {
            wire::push_field(&mut msg, p.len(), *off);
        }
        msg.extend_from_slice(&self.flags.to_le_bytes());
        msg.extend_from_slice(&[10, 0, 0x61, 0x4a, 0, 0, 0, 0x0f]);
        msg.extend_from_slice(&[0; 16]);
        for p in payloads {
            msg.extend_from_slice(p);
        }
        if self.mic {
            let mut mic = keys::hmac_md5(&exported, &[negotiate, challenge_msg, &msg]);
            if self.corrupt_mic {
                mic[0] ^= 1;
            }
            msg[72..88].copy_from_slice(&mic);
        }
        (msg, exported, neg_flags & self.flags)
    }
}

fn done(step: Step) -> Authenticated {
    match step {
        Step::Done(auth) => auth,
        other => panic!("expected Done, got {other:?}"),
    }
}

fn cont(step: Step) -> Vec<u8> {
    match step {
        Step::Continue(token) => token,
        other => panic!("expected Continue, got {other:?}"),
    }
}

fn failed(step: Step) -> AuthError {
    match step {
        Step::Failed(err) => err,
        other => panic!("expected Failed, got {other:?}"),
    }
}

/// Raw NTLMSSP exchange; returns the last step and the exported key the
/// client derived.
fn run_raw(client: &Client) -> (Step, [u8; 16]) {
    let creds = users();
    let mut acc = acceptor(false);
    let negotiate = negotiate_msg(client.flags);
    let challenge = cont(acc.step(&negotiate, &creds));
    let (auth, exported, _) = client.authenticate(&negotiate, &challenge);
    (acc.step(&auth, &creds), exported)
}

fn mech_types_der(mechs: &[&[u8]]) -> Vec<u8> {
    let mut list = Vec::new();
    for mech in mechs {
        der::write(&mut list, der::OID, mech);
    }
    der::tlv(der::SEQUENCE, &list)
}

#[test]
fn ms_nlmp_4_2_4_authenticate_message_is_accepted() {
    // MS-NLMP 4.2.4.3: the AUTHENTICATE for server challenge 0123456789abcdef,
    // user "User", domain "Domain", password "Password", with key exchange of
    // the random session key 55..55.
    use crate::initiator::tests::SPEC_AUTHENTICATE;
    let mut creds = users();
    creds.add("user", "Password").unwrap();
    let mut acc = Acceptor::new(CHALLENGE, 0, info(), false);
    let challenge = cont(acc.step(&negotiate_msg(CLIENT_FLAGS), &creds));
    assert_eq!(&challenge[24..32], &CHALLENGE);
    let auth = done(acc.step(&SPEC_AUTHENTICATE, &creds));
    assert_eq!(auth.user, "User");
    assert_eq!(auth.domain, "Domain");
    assert_eq!(auth.session_key, [0x55; 16]);
    assert!(!auth.anonymous);
    assert!(!auth.guest);
    assert!(auth.token_out.is_empty());

    // The same message with a different password in the store fails.
    let mut creds = users();
    creds.add("user", "password").unwrap();
    let mut acc = Acceptor::new(CHALLENGE, 0, info(), false);
    cont(acc.step(&negotiate_msg(CLIENT_FLAGS), &creds));
    assert_eq!(
        failed(acc.step(&SPEC_AUTHENTICATE, &creds)),
        AuthError::LogonFailure
    );
}

#[test]
fn challenge_message_contents() {
    let creds = users();
    let mut acc = acceptor(false);
    let challenge = cont(acc.step(&negotiate_msg(CLIENT_FLAGS), &creds));
    assert_eq!(wire::message_type(&challenge), Ok(wire::CHALLENGE));
    let chal_flags = u32::from_le_bytes(challenge[20..24].try_into().unwrap());
    for flag in [
        flags::UNICODE,
        flags::REQUEST_TARGET,
        flags::SIGN,
        flags::SEAL,
        flags::NTLM,
        flags::ALWAYS_SIGN,
        flags::TARGET_TYPE_DOMAIN,
        flags::EXTENDED_SESSIONSECURITY,
        flags::TARGET_INFO,
        flags::VERSION,
        flags::NEGOTIATE_128,
        flags::KEY_EXCH,
        flags::NEGOTIATE_56,
    ] {
        assert_ne!(chal_flags & flag, 0, "flag {flag:#x} missing");
    }
    assert_eq!(chal_flags & (flags::OEM | flags::TARGET_TYPE_SERVER), 0);
    assert_eq!(&challenge[24..32], &CHALLENGE);

    // Target name: the workgroup, in UTF-16.
    let name_len = usize::from(u16::from_le_bytes([challenge[12], challenge[13]]));
    let name_off = u32::from_le_bytes(challenge[16..20].try_into().unwrap()) as usize;
    assert_eq!(
        &challenge[name_off..name_off + name_len],
        crate::text::utf16le("WORKGROUP").as_slice()
    );

    let info_len = usize::from(u16::from_le_bytes([challenge[40], challenge[41]]));
    let info_off = u32::from_le_bytes(challenge[44..48].try_into().unwrap()) as usize;
    let pairs = &challenge[info_off..info_off + info_len];
    assert_eq!(info_off + info_len, challenge.len());
    let av = |id| wire::find_av(pairs, id).unwrap().map(<[u8]>::to_vec);
    use crate::text::utf16le;
    assert_eq!(av(wire::av::NB_DOMAIN_NAME), Some(utf16le("WORKGROUP")));
    assert_eq!(av(wire::av::NB_COMPUTER_NAME), Some(utf16le("NAS")));
    assert_eq!(av(wire::av::DNS_DOMAIN_NAME), Some(utf16le("example.org")));
    assert_eq!(
        av(wire::av::DNS_COMPUTER_NAME),
        Some(utf16le("nas.example.org"))
    );
    assert_eq!(av(wire::av::TIMESTAMP), Some(NOW.to_le_bytes().to_vec()));
    assert_eq!(&pairs[pairs.len() - 4..], &[0, 0, 0, 0]);
}

#[test]
fn challenge_flags_follow_the_client() {
    let creds = users();
    // A plain client: OEM only, no signing, no key exchange, and a server
    // without a workgroup of its own.
    let mut acc = Acceptor::new(
        CHALLENGE,
        NOW,
        ServerInfo {
            netbios_domain: String::new(),
            netbios_computer: "NAS".into(),
            ..ServerInfo::default()
        },
        false,
    );
    let challenge = cont(acc.step(&negotiate_msg(flags::OEM | flags::NTLM), &creds));
    let chal_flags = u32::from_le_bytes(challenge[20..24].try_into().unwrap());
    assert_eq!(
        chal_flags,
        flags::OEM
            | flags::NTLM
            | flags::REQUEST_TARGET
            | flags::TARGET_INFO
            | flags::TARGET_TYPE_SERVER
    );
    // The target name is the computer name in 8-bit characters.
    assert_eq!(&challenge[56..59], b"NAS");
    // NbDomainName falls back to the computer name; no DNS names are sent.
    let pairs = &challenge[59..];
    let nb_domain = wire::find_av(pairs, wire::av::NB_DOMAIN_NAME).unwrap();
    assert_eq!(nb_domain, Some(crate::text::utf16le("NAS").as_slice()));
    assert_eq!(wire::find_av(pairs, wire::av::DNS_DOMAIN_NAME), Ok(None));
}

#[test]
fn raw_ntlm_right_password() {
    let (step, exported) = run_raw(&Client::new("alice", "Password"));
    let auth = done(step);
    assert_eq!(exported, RANDOM_SESSION_KEY);
    assert_eq!(auth.session_key, RANDOM_SESSION_KEY);
    assert_eq!(auth.user, "alice");
    assert_eq!(auth.domain, "WORKGROUP");
    assert!(auth.token_out.is_empty());
    assert!(!auth.anonymous);
}

#[test]
fn raw_ntlm_without_key_exchange_uses_the_session_base_key() {
    let mut client = Client::new("bob", "hunter2");
    client.flags &= !flags::KEY_EXCH;
    let (step, exported) = run_raw(&client);
    let auth = done(step);
    assert_ne!(exported, RANDOM_SESSION_KEY);
    assert_eq!(auth.session_key, exported);
}

#[test]
fn wrong_password_unknown_user_and_ntlmv1_fail() {
    let (step, _) = run_raw(&Client::new("alice", "password"));
    assert_eq!(failed(step), AuthError::LogonFailure);

    let (step, _) = run_raw(&Client::new("mallory", "Password"));
    assert_eq!(failed(step), AuthError::LogonFailure);

    let mut v1 = Client::new("alice", "Password");
    v1.ntlm_v1 = true;
    v1.mic = false;
    let (step, _) = run_raw(&v1);
    assert_eq!(failed(step), AuthError::LogonFailure);
}

#[test]
fn a_failed_logon_keeps_the_name_the_client_gave() {
    let creds = users();
    let mut acc = acceptor(false);
    assert_eq!(acc.claimed(), None);
    let negotiate = negotiate_msg(CLIENT_FLAGS);
    let challenge = cont(acc.step(&negotiate, &creds));
    let unnamed = Claim {
        mechanism: Mechanism::Ntlm,
        ..Claim::default()
    };
    assert_eq!(acc.claimed(), Some(&unnamed));
    let mut client = Client::new("mallory", "guess");
    client.domain = "EVIL\"\n".into();
    let (auth, _, _) = client.authenticate(&negotiate, &challenge);
    assert_eq!(failed(acc.step(&auth, &creds)), AuthError::LogonFailure);
    assert_eq!(
        acc.claimed(),
        Some(&Claim {
            user: "mallory".into(),
            domain: "EVIL\"\n".into(),
            mechanism: Mechanism::Ntlm,
        })
    );

    // A message that is no NTLM at all names nobody and no mechanism.
    let mut acc = acceptor(false);
    assert_eq!(failed(acc.step(b"garbage", &creds)), AuthError::Malformed);
    assert_eq!(acc.claimed(), None);
}

#[test]
fn unreadable_av_pairs_are_malformed_whatever_the_password() {
    for password in ["Password", "wrong"] {
        let mut client = Client::new("alice", password);
        client.bad_pairs = true;
        let (step, _) = run_raw(&client);
        assert_eq!(failed(step), AuthError::Malformed);
    }
}

#[test]
fn lm_only_response_fails() {
    let creds = users();
    let mut acc = acceptor(true);
    let negotiate = negotiate_msg(CLIENT_FLAGS);
    let challenge = cont(acc.step(&negotiate, &creds));
    let mut client = Client::new("alice", "Password");
    client.mic = false;
    let (mut auth, _, _) = client.authenticate(&negotiate, &challenge);
    // Zero the NtChallengeResponse length.
    auth[20..24].fill(0);
    assert_eq!(failed(acc.step(&auth, &creds)), AuthError::LogonFailure);
}

#[test]
fn bad_mic_fails() {
    let mut client = Client::new("alice", "Password");
    client.corrupt_mic = true;
    let (step, _) = run_raw(&client);
    assert_eq!(failed(step), AuthError::LogonFailure);

    // A MIC announced in the AV pairs but left out of the message.
    let creds = users();
    let mut acc = acceptor(false);
    let negotiate = negotiate_msg(CLIENT_FLAGS);
    let challenge = cont(acc.step(&negotiate, &creds));
    let (mut auth, _, _) = Client::new("alice", "Password").authenticate(&negotiate, &challenge);
    auth[72..88].fill(0);
    assert_eq!(failed(acc.step(&auth, &creds)), AuthError::LogonFailure);
}

#[test]
fn domain_leniency() {
    // Hash computed with an empty domain, another one sent.
    let mut client = Client::new("alice", "Password");
    client.domain = "SOMEWHERE".into();
    client.hash_domain = Some(String::new());
    let (step, _) = run_raw(&client);
    assert_eq!(done(step).domain, "SOMEWHERE");

    // Hash computed with the server's workgroup.
    client.hash_domain = Some("WORKGROUP".into());
    let (step, _) = run_raw(&client);
    done(step);

    // Hash computed with a domain the server cannot guess.
    client.hash_domain = Some("ELSEWHERE".into());
    let (step, _) = run_raw(&client);
    assert_eq!(failed(step), AuthError::LogonFailure);
}

#[test]
fn user_names_are_case_insensitive() {
    let (step, _) = run_raw(&Client::new("ALICE", "Password"));
    assert_eq!(done(step).user, "ALICE");
    let (step, _) = run_raw(&Client::new("Bob", "hunter2"));
    done(step);
}

#[test]
fn unknown_users_become_guests_only_where_asked_and_wrong_passwords_never_do() {
    let logon = |client: &Client, allow_guest: bool, as_guests: bool| {
        let creds = users();
        let mut acc = acceptor(allow_guest).unknown_users_as_guests(as_guests);
        let negotiate = negotiate_msg(client.flags);
        let challenge = cont(acc.step(&negotiate, &creds));
        let (auth, _, _) = client.authenticate(&negotiate, &challenge);
        let step = acc.step(&auth, &creds);
        (step, acc.claimed().map(|c| c.user.clone()))
    };
    let (step, claimed) = logon(&Client::new("mallory", "guess"), true, true);
    let auth = done(step);
    assert!(auth.guest && !auth.anonymous);
    assert_eq!((auth.user.as_str(), auth.session_key), ("", [0; 16]));
    assert_eq!(claimed.as_deref(), Some("mallory"));
    // Without guests, or without the mapping, it fails as before.
    for (allow_guest, as_guests) in [(false, true), (true, false)] {
        let (step, _) = logon(&Client::new("mallory", "guess"), allow_guest, as_guests);
        assert_eq!(failed(step), AuthError::LogonFailure);
    }
    // A known user with a wrong password is no guest.
    let (step, _) = logon(&Client::new("alice", "wrong"), true, true);
    assert_eq!(failed(step), AuthError::LogonFailure);
}

#[test]
fn anonymous_only_when_guests_are_allowed() {
    for allow_guest in [false, true] {
        let creds = users();
        let mut acc = acceptor(allow_guest);
        let negotiate = negotiate_msg(CLIENT_FLAGS);
        cont(acc.step(&negotiate, &creds));
        // Anonymous: empty user, domain and NT response, LM response Z(1).
        let mut msg = wire::SIGNATURE.to_vec();
        msg.extend_from_slice(&wire::AUTHENTICATE.to_le_bytes());
        wire::push_field(&mut msg, 1, 88);
        for _ in 0..5 {
            wire::push_field(&mut msg, 0, 89);
        }
        msg.extend_from_slice(&(CLIENT_FLAGS | 0x800).to_le_bytes());
        msg.extend_from_slice(&[0; 24]);
        msg.push(0);
        let step = acc.step(&msg, &creds);
        assert_eq!(
            acc.claimed().map(|c| c.mechanism),
            Some(Mechanism::Anonymous)
        );
        if allow_guest {
            let auth = done(step);
            assert!(auth.anonymous);
            assert!(!auth.guest);
            assert_eq!(auth.user, "");
            assert_eq!(auth.session_key, [0; 16]);
        } else {
            assert_eq!(failed(step), AuthError::LogonFailure);
        }
    }
}

/// The SPNEGO exchange as smbclient runs it: NTLMSSP first with an optimistic
/// NEGOTIATE, then the AUTHENTICATE with a mechListMIC.
fn run_spnego(
    client: &Client,
    client_mic: Option<fn(&mut [u8; 16])>,
) -> (Step, Vec<u8>, [u8; 16], u32) {
    let creds = users();
    let mut acc = acceptor(false);
    let negotiate = negotiate_msg(client.flags);
    let init = spnego::build_init(&[OID_NTLMSSP], Some(&negotiate));
    let reply = cont(acc.step(&init, &creds));
    assert_eq!(spnego::resp_state(&reply), Some(1));
    assert!(reply.windows(OID_NTLMSSP.len()).any(|w| w == OID_NTLMSSP));
    let challenge = spnego::parse_resp(&reply)
        .unwrap()
        .response_token
        .unwrap()
        .to_vec();
    let (auth, exported, neg_flags) = client.authenticate(&negotiate, &challenge);
    let mech_types = mech_types_der(&[OID_NTLMSSP]);
    let mic = client_mic.map(|tamper| {
        let mut mic =
            Signer::new(&exported, neg_flags, Direction::ClientToServer).mac(0, &mech_types);
        tamper(&mut mic);
        mic
    });
    let resp = spnego::build_resp(
        spnego::NegState::AcceptIncomplete,
        None,
        Some(&auth),
        mic.as_ref().map(|m| m.as_slice()),
    );
    (acc.step(&resp, &creds), mech_types, exported, neg_flags)
}

#[test]
fn spnego_with_mech_list_mic() {
    let (step, mech_types, exported, neg_flags) =
        run_spnego(&Client::new("alice", "Password"), Some(|_| {}));
    let auth = done(step);
    assert_eq!(auth.session_key, RANDOM_SESSION_KEY);
    assert_eq!(spnego::resp_state(&auth.token_out), Some(0));
    let resp = spnego::parse_resp(&auth.token_out).unwrap();
    assert_eq!(resp.response_token, None);
    let expected = Signer::new(&exported, neg_flags, Direction::ServerToClient).mac(0, &mech_types);
    assert_eq!(resp.mech_list_mic, Some(expected.as_slice()));
}

#[test]
fn spnego_without_mech_list_mic() {
    let (step, _, _, _) = run_spnego(&Client::new("alice", "Password"), None);
    let auth = done(step);
    assert_eq!(
        auth.token_out,
        [0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x00]
    );
}

#[test]
fn spnego_bad_mech_list_mic_fails() {
    let (step, _, _, _) = run_spnego(
        &Client::new("alice", "Password"),
        Some(|mic| mic[5] ^= 0x80),
    );
    assert_eq!(failed(step), AuthError::LogonFailure);
}

#[test]
fn spnego_wrong_password_fails() {
    let (step, _, _, _) = run_spnego(&Client::new("alice", "wrong"), Some(|_| {}));
    assert_eq!(failed(step), AuthError::LogonFailure);
}

#[test]
fn spnego_without_key_exchange_signs_in_clear() {
    let mut client = Client::new("bob", "hunter2");
    client.flags &= !flags::KEY_EXCH;
    let (step, mech_types, exported, neg_flags) = run_spnego(&client, Some(|_| {}));
    assert_eq!(neg_flags & flags::KEY_EXCH, 0);
    let auth = done(step);
    let resp = spnego::parse_resp(&auth.token_out).unwrap();
    let expected = Signer::new(&exported, neg_flags, Direction::ServerToClient).mac(0, &mech_types);
    assert_eq!(resp.mech_list_mic, Some(expected.as_slice()));
}

#[test]
fn spnego_kerberos_first_falls_back_to_ntlm() {
    let creds = users();
    let mut acc = acceptor(false);
    // Windows' order, with an optimistic Kerberos token we cannot use.
    let init = spnego::build_init(&[KRB5, OID_NTLMSSP], Some(b"\x60\x03\x06\x01\x00"));
    let reply = cont(acc.step(&init, &creds));
    assert_eq!(spnego::resp_state(&reply), Some(3));
    assert_eq!(spnego::parse_resp(&reply).unwrap().response_token, None);
    assert!(reply.windows(OID_NTLMSSP.len()).any(|w| w == OID_NTLMSSP));

    let negotiate = negotiate_msg(CLIENT_FLAGS);
    let resp = spnego::build_resp(
        spnego::NegState::AcceptIncomplete,
        None,
        Some(&negotiate),
        None,
    );
    let reply = cont(acc.step(&resp, &creds));
    assert_eq!(spnego::resp_state(&reply), Some(1));
    let challenge = spnego::parse_resp(&reply)
        .unwrap()
        .response_token
        .unwrap()
        .to_vec();

    let (auth, exported, neg_flags) =
        Client::new("alice", "Password").authenticate(&negotiate, &challenge);
    let mech_types = mech_types_der(&[KRB5, OID_NTLMSSP]);
    let mic = Signer::new(&exported, neg_flags, Direction::ClientToServer).mac(0, &mech_types);
    let resp = spnego::build_resp(
        spnego::NegState::AcceptIncomplete,
        None,
        Some(&auth),
        Some(&mic),
    );
    let auth = done(acc.step(&resp, &creds));
    assert_eq!(auth.session_key, RANDOM_SESSION_KEY);
    let server_mic =
        Signer::new(&exported, neg_flags, Direction::ServerToClient).mac(0, &mech_types);
    let out = spnego::parse_resp(&auth.token_out).unwrap();
    assert_eq!(out.mech_list_mic, Some(server_mic.as_slice()));
}

#[test]
fn spnego_without_ntlm_is_unsupported() {
    let creds = users();
    let mut acc = acceptor(false);
    let init = spnego::build_init(&[KRB5], Some(b"x"));
    assert_eq!(failed(acc.step(&init, &creds)), AuthError::Unsupported);
}

#[test]
fn nothing_is_accepted_after_the_end() {
    let creds = users();
    let client = Client::new("alice", "Password");
    let mut acc = acceptor(false);
    let negotiate = negotiate_msg(CLIENT_FLAGS);
    let challenge = cont(acc.step(&negotiate, &creds));
    let (auth, _, _) = client.authenticate(&negotiate, &challenge);
    done(acc.step(&auth, &creds));
    assert_eq!(failed(acc.step(&auth, &creds)), AuthError::Malformed);
    assert_eq!(failed(acc.step(&negotiate, &creds)), AuthError::Malformed);
}

#[test]
fn mismatched_messages_are_malformed() {
    let creds = users();
    // An AUTHENTICATE first, garbage first, an empty token first.
    for first in [&b"NTLMSSP\0\x03\0\0\0"[..], b"\x01\x02\x03", b""] {
        let mut acc = acceptor(false);
        assert_eq!(failed(acc.step(first, &creds)), AuthError::Malformed);
    }
    // Raw NTLM started, SPNEGO continued.
    let mut acc = acceptor(false);
    cont(acc.step(&negotiate_msg(CLIENT_FLAGS), &creds));
    let resp = spnego::build_resp(
        spnego::NegState::AcceptIncomplete,
        None,
        Some(b"NTLMSSP\0"),
        None,
    );
    assert_eq!(failed(acc.step(&resp, &creds)), AuthError::Malformed);
}

#[test]
fn negotiate_hint_offers_ntlmssp() {
    let hint = crate::negotiate_hint(false);
    let init = spnego::parse_init(&hint).unwrap();
    assert_eq!(init.mech_types, [OID_NTLMSSP]);
}

/// A small deterministic generator, so failures reproduce.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Tokens of a real exchange and the acceptor states that receive them.
fn real_tokens() -> Vec<(Vec<Vec<u8>>, Vec<u8>)> {
    let client = Client::new("alice", "Password");
    let negotiate = negotiate_msg(CLIENT_FLAGS);
    let creds = users();

    let mut acc = acceptor(false);
    let challenge = cont(acc.step(&negotiate, &creds));
    let (auth, exported, neg_flags) = client.authenticate(&negotiate, &challenge);

    let init = spnego::build_init(&[OID_NTLMSSP], Some(&negotiate));
    let mut acc = acceptor(false);
    let spnego_challenge = cont(acc.step(&init, &creds));
    let challenge2 = spnego::parse_resp(&spnego_challenge)
        .unwrap()
        .response_token
        .unwrap()
        .to_vec();
    let (auth2, exported2, neg_flags2) = client.authenticate(&negotiate, &challenge2);
    let mech_types = mech_types_der(&[OID_NTLMSSP]);
    let mic = Signer::new(&exported2, neg_flags2, Direction::ClientToServer).mac(0, &mech_types);
    let final_resp = spnego::build_resp(
        spnego::NegState::AcceptIncomplete,
        None,
        Some(&auth2),
        Some(&mic),
    );
    let _ = (exported, neg_flags);

    let samba_init = b64::decode(SAMBA_SPNEGO_INIT);
    vec![
        (vec![], b64::decode(SAMBA_RAW_NEGOTIATE)),
        (
            vec![b64::decode(SAMBA_RAW_NEGOTIATE)],
            b64::decode(SAMBA_RAW_AUTHENTICATE),
        ),
        (vec![], samba_init.clone()),
        (vec![samba_init], b64::decode(SAMBA_SPNEGO_FINAL)),
        (vec![], negotiate.clone()),
        (vec![negotiate.clone()], auth),
        (vec![], init.clone()),
        (vec![init], final_resp),
    ]
}

#[test]
fn never_panics_on_damaged_tokens() {
    let creds = users();
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    for (before, token) in real_tokens() {
        let prepared = || {
            let mut acc = acceptor(true);
            for t in &before {
                cont(acc.step(t, &creds));
            }
            acc
        };
        // The intact token is accepted (sanity of the harness).
        assert!(!matches!(prepared().step(&token, &creds), Step::Failed(_)));

        // Every proper prefix fails or, for the first message, at worst
        // continues; none authenticates.
        for len in 0..token.len() {
            let step = prepared().step(&token[..len], &creds);
            assert!(!matches!(step, Step::Done(_)), "prefix {len} authenticated");
        }
        // Byte flips at every position, with a few values each.
        for pos in 0..token.len() {
            for _ in 0..4 {
                let mut damaged = token.clone();
                damaged[pos] ^= (rng.next() as u8) | 1;
                let _ = prepared().step(&damaged, &creds);
            }
        }
        // Random bytes with the right first bytes, of random lengths.
        for _ in 0..500 {
            let len = (rng.next() % 300) as usize;
            let mut junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let keep = token.len().min(len).min((rng.next() % 16) as usize);
            junk[..keep].copy_from_slice(&token[..keep]);
            let _ = prepared().step(&junk, &creds);
        }
    }
}

/// Tokens Samba 4.17's client sent (`ntlm_auth` with the session key and
/// signing features an SMB client asks for) to an acceptor made by
/// [`acceptor`]: the acceptor is deterministic, so they replay. Samba accepted
/// our final token and reported these session keys.
const SAMBA_RAW_NEGOTIATE: &str = "TlRMTVNTUAABAAAAFYIIYgAAAAAoAAAAAAAAACgAAAAGAQAAAAAADw==";
const SAMBA_RAW_AUTHENTICATE: &str = "TlRMTVNTUAADAAAAGAAYAFgAAADoAOgAcAAAABIAEgBYAQAACgAKAGoBAAAAAAAAdAEAABAAEAB0AQAAFYIIYgYBAAAAAAAPg2N5tTyg0RsnT7h8Q5RqCgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAPKJmW4d5DYIvb3iTFfIjpQBAQAAAAAAAHhWNBIAANkBnjE43yeWlbgAAAAAAgASAFcATwBSAEsARwBSAE8AVQBQAAEABgBOAEEAUwAEABYAZQB4AGEAbQBwAGwAZQAuAG8AcgBnAAMAHgBuAGEAcwAuAGUAeABhAG0AcABsAGUALgBvAHIAZwAHAAgAeFY0EgAA2QEGAAQAAgAAAAgAMAAwAAAAAAAAAAAAAAAAAAAAJ02v1YLb+R3nVvccXzZ0KvZfcxXwkNiPmEtpXyKT6yMKABAAAAAAAAAAAAAAAAAAAAAAAAAAAABXAE8AUgBLAEcAUgBPAFUAUABhAGwAaQBjAGUAFleF5zxVwD9oyc//n+S5MQ==";
const SAMBA_RAW_KEY: &str = "Fo0EZ8v9Brgju3ZzmOpfUg==";
const SAMBA_SPNEGO_INIT: &str = "YEgGBisGAQUFAqA+MDygDjAMBgorBgEEAYI3AgIKoioEKE5UTE1TU1AAAQAAABWCCGIAAAAAKAAAAAAAAAAoAAAABgEAAAAAAA8=";
const SAMBA_SPNEGO_FINAL: &str = "oYIBpDCCAaCiggGIBIIBhE5UTE1TU1AAAwAAABgAGABYAAAA6ADoAHAAAAASABIAWAEAAAoACgBqAQAAAAAAAHQBAAAQABAAdAEAABWCCGIGAQAAAAAADypT3YBHL3tu4R6WrwPvKQ4AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAD8nX064SRBQJTK1Pv29L5DAQEAAAAAAAB4VjQSAADZASCbTTSjipsrAAAAAAIAEgBXAE8AUgBLAEcAUgBPAFUAUAABAAYATgBBAFMABAAWAGUAeABhAG0AcABsAGUALgBvAHIAZwADAB4AbgBhAHMALgBlAHgAYQBtAHAAbABlAC4AbwByAGcABwAIAHhWNBIAANkBBgAEAAIAAAAIADAAMAAAAAAAAAAAAAAAAAAAANy4Txs0cwf5NZrpc5ywUkB8h9szdTAu35rQ0uws2jRaCgAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAVwBPAFIASwBHAFIATwBVAFAAYQBsAGkAYwBlAPw1Mg+3pHcHlMwLgUDTD2ijEgQQAQAAAIfajLN5HT+7AAAAAA==";
const SAMBA_SPNEGO_KEY: &str = "pVTCNqNs+2tcP7VZfqaIlQ==";

#[test]
fn samba_client_tokens_replay() {
    let creds = users();

    let mut acc = acceptor(false);
    cont(acc.step(&b64::decode(SAMBA_RAW_NEGOTIATE), &creds));
    let auth = done(acc.step(&b64::decode(SAMBA_RAW_AUTHENTICATE), &creds));
    assert_eq!(auth.user, "alice");
    assert_eq!(auth.domain, "WORKGROUP");
    assert_eq!(auth.session_key.to_vec(), b64::decode(SAMBA_RAW_KEY));

    let mut acc = acceptor(false);
    let reply = cont(acc.step(&b64::decode(SAMBA_SPNEGO_INIT), &creds));
    assert_eq!(spnego::resp_state(&reply), Some(1));
    let final_token = b64::decode(SAMBA_SPNEGO_FINAL);
    assert!(spnego::parse_resp(&final_token)
        .unwrap()
        .mech_list_mic
        .is_some());
    let auth = done(acc.step(&final_token, &creds));
    assert_eq!(auth.session_key.to_vec(), b64::decode(SAMBA_SPNEGO_KEY));
    assert_eq!(spnego::resp_state(&auth.token_out), Some(0));
    let out = spnego::parse_resp(&auth.token_out).unwrap();
    assert_eq!(out.mech_list_mic.map(<[u8]>::len), Some(16));

    // The same tokens with one bit of the MIC flipped fail.
    let mut acc = acceptor(false);
    cont(acc.step(&b64::decode(SAMBA_RAW_NEGOTIATE), &creds));
    let mut tampered = b64::decode(SAMBA_RAW_AUTHENTICATE);
    tampered[80] ^= 0x01;
    assert_eq!(failed(acc.step(&tampered, &creds)), AuthError::LogonFailure);

    // And so does the mechListMIC (its checksum sits 8 bytes from the end).
    let mut acc = acceptor(false);
    cont(acc.step(&b64::decode(SAMBA_SPNEGO_INIT), &creds));
    let mut tampered = final_token.clone();
    let len = tampered.len();
    tampered[len - 8] ^= 0x01;
    assert_eq!(failed(acc.step(&tampered, &creds)), AuthError::LogonFailure);
}

/// Minimal base64 for talking to Samba's ntlm_auth helper.
mod b64 {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(data: &[u8]) -> String {
        let mut out = String::new();
        for chunk in data.chunks(3) {
            let b = [
                chunk[0],
                *chunk.get(1).unwrap_or(&0),
                *chunk.get(2).unwrap_or(&0),
            ];
            let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    pub fn decode(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        let mut acc = 0u32;
        let mut bits = 0;
        for c in text.bytes().filter(|&c| c != b'=') {
            let v = ALPHABET.iter().position(|&a| a == c).expect("base64 digit") as u32;
            acc = acc << 6 | v;
            bits += 6;
            if bits >= 8 {
                bits -= 8;
                out.push((acc >> bits) as u8);
            }
        }
        out
    }

    #[test]
    fn round_trip() {
        for data in [&b""[..], b"a", b"ab", b"abc", b"NTLMSSP\0\x01\xff"] {
            assert_eq!(decode(&encode(data)), data);
        }
        assert_eq!(encode(b"ab"), "YWI=");
    }
}

/// Drives Samba's own client code (`ntlm_auth`, the helper that wraps
/// Samba's gensec NTLMSSP and SPNEGO clients) against the acceptor, and
/// prints the tokens. Needs Samba's `ntlm_auth` (Debian package winbind or
/// samba-common-bin): `cargo test -p copyless-auth -- --ignored --nocapture`.
#[test]
#[ignore = "needs Samba's ntlm_auth"]
fn interop_with_samba_ntlm_auth() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command, Stdio};

    for protocol in ["ntlmssp-client-1", "gss-spnego-client"] {
        let mut child = Command::new("ntlm_auth")
            .arg(format!("--helper-protocol={protocol}"))
            .args([
                "--username=alice",
                "--password=Password",
                "--domain=WORKGROUP",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("ntlm_auth runs");
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut ask = |line: &str| {
            writeln!(stdin, "{line}").unwrap();
            let mut answer = String::new();
            stdout.read_line(&mut answer).unwrap();
            answer.trim_end().to_string()
        };

        // Ask for what an SMB client wants: then Samba sends the NTLM MIC
        // and the SPNEGO mechListMIC.
        assert_eq!(
            ask("SF NTLMSSP_FEATURE_SESSION_KEY NTLMSSP_FEATURE_SIGN"),
            "OK"
        );
        let creds = users();
        let mut acc = acceptor(false);
        let first = ask("YR");
        println!("{protocol} first: {first}");
        let token = b64::decode(first.strip_prefix("YR ").expect("YR answer"));
        let challenge = cont(acc.step(&token, &creds));
        let second = ask(&format!("TT {}", b64::encode(&challenge)));
        println!("{protocol} second: {second}");
        let reply = second
            .strip_prefix("KK ")
            .or_else(|| second.strip_prefix("AF "));
        let token = b64::decode(reply.expect("KK or AF answer"));
        let auth = done(acc.step(&token, &creds));
        assert_eq!(auth.user, "alice");
        if protocol == "gss-spnego-client" {
            // Samba's client checks our accept-completed and mechListMIC.
            let last = ask(&format!("TT {}", b64::encode(&auth.token_out)));
            println!("{protocol} last: {last}");
            assert!(last.starts_with("AF"), "Samba's client refused: {last}");
        }
        // Samba's session key is ours.
        let key = ask("GK");
        println!("{protocol} key: {key}");
        assert_eq!(key, format!("GK {}", b64::encode(&auth.session_key)));
        // Closing its input ends the helper.
        drop(stdin);
        child.wait().unwrap();
    }
}

mod kerberos {
    use std::sync::Arc;

    use super::*;
    use crate::kerberos::{KerberosService, OID_MS_KRB5};

    const KEYTAB: &[u8] = include_bytes!("../../../docs/kerberos/server.keytab");
    /// smbtorture's NegTokenInit: Kerberos only (both OIDs), with its AP-REQ.
    const TOKEN: &[u8] = include_bytes!("../../../docs/kerberos/smbtorture-negtokeninit.bin");
    /// Its ticket was issued at this Unix time and ends 4 s later.
    const ISSUED: u64 = 1_795_535_616;
    const FILETIME_1970: u64 = 116_444_736_000_000_000;

    fn filetime(unix: u64) -> u64 {
        unix * 10_000_000 + FILETIME_1970
    }

    fn kerberos_acceptor(at: u64) -> Acceptor {
        let keytab = crate::keytab::parse(KEYTAB).unwrap();
        let service = KerberosService::new(keytab, "COPYLESS.TEST".into(), 5);
        Acceptor::new(CHALLENGE, filetime(at), info(), false).with_kerberos(Arc::new(service))
    }

    #[test]
    fn one_round_with_the_ap_rep_and_the_tickets_end() {
        // users() has Alice; user names compare case-insensitively.
        let mut acc = kerberos_acceptor(ISSUED + 1);
        let auth = done(acc.step(TOKEN, &users()));
        assert_eq!(
            acc.claimed(),
            Some(&Claim {
                user: "alice".into(),
                domain: "COPYLESS.TEST".into(),
                mechanism: Mechanism::Kerberos,
            })
        );
        assert_eq!(
            (auth.user.as_str(), auth.domain.as_str()),
            ("alice", "COPYLESS.TEST")
        );
        assert_eq!(auth.expires_at, Some(filetime(ISSUED + 4)));
        assert!(!auth.anonymous && !auth.guest);
        // The client's subkey: all of it, and its first 16 bytes for SMB.
        assert_eq!(auth.full_session_key.len(), 32);
        assert_eq!(auth.session_key[..], auth.full_session_key[..16]);
        assert_eq!(auth.session_key[..4], [0x32, 0x73, 0x2d, 0x8c]);
        // accept-completed, the client's first OID, the AP-REP, no MIC.
        assert_eq!(spnego::resp_state(&auth.token_out), Some(0));
        let resp = spnego::parse_resp(&auth.token_out).unwrap();
        assert_eq!(resp.mech_list_mic, None);
        let ap_rep = resp.response_token.unwrap();
        assert_eq!(ap_rep[0], der::APPLICATION_0);
        let oid = der::tlv(der::OID, OID_MS_KRB5);
        assert!(auth.token_out.windows(oid.len()).any(|w| w == oid));
    }

    #[test]
    fn unknown_users_ended_tickets_and_servers_without_a_keytab_are_refused() {
        // Kerberos vouches for alice, but she is no user of this server.
        let mut acc = kerberos_acceptor(ISSUED + 1);
        assert_eq!(
            failed(acc.step(TOKEN, &users_without_alice())),
            AuthError::LogonFailure
        );
        assert_eq!(acc.claimed().map(|c| c.user.as_str()), Some("alice"));
        let store = users();
        let mut acc = kerberos_acceptor(ISSUED + 60);
        assert_eq!(failed(acc.step(TOKEN, &store)), AuthError::LogonFailure);
        // An ended ticket names its client only inside what was refused.
        assert_eq!(
            acc.claimed(),
            Some(&Claim {
                mechanism: Mechanism::Kerberos,
                ..Claim::default()
            })
        );
        // Without a keytab a Kerberos-only client finds nothing in common.
        assert_eq!(
            failed(acceptor(false).step(TOKEN, &store)),
            AuthError::Unsupported
        );
    }

    fn users_without_alice() -> UserStore {
        let mut store = UserStore::load(Path::new("/nonexistent/copyless-auth-test")).unwrap();
        store.add("bob", "hunter2").unwrap();
        store
    }

    #[test]
    fn a_ticket_for_another_service_falls_back_to_ntlm_when_offered() {
        // Keys of another service only: the ticket names none of them.
        let mut keytab = crate::keytab::parse(KEYTAB).unwrap();
        for e in &mut keytab {
            e.principal = "cifs/elsewhere".into();
        }
        let service = KerberosService::new(keytab, "COPYLESS.TEST".into(), 5);
        let init = spnego::parse_init(TOKEN).unwrap();
        let with_ntlm = spnego::build_init(&[OID_MS_KRB5, OID_NTLMSSP], init.mech_token);
        let mut acc = Acceptor::new(CHALLENGE, filetime(ISSUED + 1), info(), false)
            .with_kerberos(Arc::new(service));
        let reply = cont(acc.step(&with_ntlm, &users()));
        // NTLMSSP chosen, not the client's first choice: request-mic.
        assert_eq!(spnego::resp_state(&reply), Some(3));
    }
}
