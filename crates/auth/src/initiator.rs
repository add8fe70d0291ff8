//! The client side of NTLMv2 inside SPNEGO (MS-NLMP 3.1.5, MS-SPNG 3.1.5),
//! as an SMB client runs it: an optimistic NTLM NEGOTIATE in the
//! NegTokenInit, the AUTHENTICATE (with MIC) and a mechListMIC in the second
//! token, and a check of the server's mechListMIC at the end.
//!
//! Sans-IO like the acceptor: the client challenge, the random session key
//! and the clock come from the caller.

use zeroize::Zeroizing;

use crate::acceptor::AuthError;
use crate::der;
use crate::ntlm::keys::{self, Direction, Signer};
use crate::ntlm::{flags, wire};
use crate::spnego::{self, NegState, OID_NTLMSSP};
use crate::text;

/// What we ask for in NEGOTIATE: what Windows 10 and Samba's client ask for.
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

/// The random values one authentication consumes, drawn by the caller.
#[derive(Clone)]
pub struct InitiatorRandom {
    /// The 8-byte client challenge of the NTLMv2 blob.
    pub client_challenge: [u8; 8],
    /// ExportedSessionKey when key exchange is negotiated.
    pub session_key: [u8; 16],
}

/// Who authenticates, and as which machine.
#[derive(Clone)]
pub struct ClientIdentity {
    pub user: String,
    /// The user's domain; empty means "the server's", taken from the
    /// CHALLENGE (right for a standalone server's local users).
    pub domain: String,
    pub password: String,
    /// NetBIOS name of this machine.
    pub workstation: String,
}

impl Drop for ClientIdentity {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.password.zeroize();
    }
}

/// What [`Initiator::step`] produced.
#[derive(Debug, PartialEq, Eq)]
pub enum InitiatorStep {
    /// Send this token in the next SESSION_SETUP request.
    Send(Vec<u8>),
    /// The server's last token checked out; the session key is ready.
    Done,
}

enum State {
    Start,
    AwaitChallenge { negotiate: Vec<u8> },
    AwaitFinal,
    Finished,
}

/// One NTLMv2 authentication from the client's side.
pub struct Initiator {
    identity: ClientIdentity,
    random: InitiatorRandom,
    /// Windows FILETIME for the blob when the server sends no timestamp.
    now: u64,
    state: State,
    exported_key: Option<Zeroizing<[u8; 16]>>,
    neg_flags: u32,
}

/// The DER MechTypeList we send, which both mechListMICs cover.
fn mech_types_der() -> Vec<u8> {
    der::tlv(der::SEQUENCE, &der::tlv(der::OID, OID_NTLMSSP))
}

impl Initiator {
    pub fn new(identity: ClientIdentity, random: InitiatorRandom, now: u64) -> Initiator {
        Initiator {
            identity,
            random,
            now,
            state: State::Start,
            exported_key: None,
            neg_flags: 0,
        }
    }

    /// The NTLM ExportedSessionKey, which SMB uses as the session key; set
    /// once the AUTHENTICATE has been built.
    pub fn session_key(&self) -> Option<[u8; 16]> {
        self.exported_key.as_deref().copied()
    }

    /// Feeds the server's last security buffer (empty for the first call;
    /// the NEGOTIATE response's SPNEGO hint may be passed but is not needed).
    pub fn step(&mut self, server_token: &[u8]) -> Result<InitiatorStep, AuthError> {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Start => {
                let negotiate = negotiate_message();
                let token = spnego::build_init(&[OID_NTLMSSP], Some(&negotiate));
                self.state = State::AwaitChallenge { negotiate };
                Ok(InitiatorStep::Send(token))
            }
            State::AwaitChallenge { negotiate } => {
                let resp = spnego::parse_resp(server_token)?;
                if spnego::resp_state(server_token) == Some(2) {
                    return Err(AuthError::Unsupported);
                }
                let challenge = resp.response_token.ok_or(AuthError::Malformed)?;
                let built = self.authenticate(&negotiate, challenge)?;
                let mic = Signer::new(&built.exported, built.flags, Direction::ClientToServer)
                    .mac(0, &mech_types_der());
                let token = spnego::build_resp(
                    NegState::AcceptIncomplete,
                    None,
                    Some(&built.message),
                    Some(&mic),
                );
                self.neg_flags = built.flags;
                self.exported_key = Some(Zeroizing::new(built.exported));
                self.state = State::AwaitFinal;
                Ok(InitiatorStep::Send(token))
            }
            State::AwaitFinal => {
                self.check_final(server_token)?;
                Ok(InitiatorStep::Done)
            }
            State::Finished => Err(AuthError::Malformed),
        }
    }

    /// The server's accept-completed, and its mechListMIC when it sends one.
    fn check_final(&self, token: &[u8]) -> Result<(), AuthError> {
        if token.is_empty() {
            // Some servers end a successful exchange without a token.
            return Ok(());
        }
        if spnego::resp_state(token) != Some(NegState::AcceptCompleted as u8) {
            return Err(AuthError::LogonFailure);
        }
        let resp = spnego::parse_resp(token)?;
        if let (Some(mic), Some(key)) = (resp.mech_list_mic, self.exported_key.as_deref()) {
            let expected = Signer::new(key, self.neg_flags, Direction::ServerToClient)
                .mac(0, &mech_types_der());
            if !keys::ct_eq(&expected, mic) {
                return Err(AuthError::LogonFailure);
            }
        }
        Ok(())
    }

    fn authenticate(&self, negotiate: &[u8], challenge_msg: &[u8]) -> Result<Built, AuthError> {
        let challenge = wire::parse_challenge(challenge_msg)?;
        let domain = if self.identity.domain.is_empty() {
            // The target name names the server's domain (or the server).
            if challenge.flags & flags::UNICODE != 0 {
                text::from_utf16le(challenge.target_name).ok_or(AuthError::Malformed)?
            } else {
                text::from_oem(challenge.target_name)
            }
        } else {
            self.identity.domain.clone()
        };
        let input = AuthenticateInput {
            user: &self.identity.user,
            domain: &domain,
            workstation: &self.identity.workstation,
            nt_hash: Zeroizing::new(crate::nt_hash(&self.identity.password)),
            flags: challenge.flags & CLIENT_FLAGS,
            server_challenge: challenge.server_challenge,
            target_info: challenge.target_info,
            client_challenge: self.random.client_challenge,
            session_key: self.random.session_key,
            now: self.now,
            version: wire::OUR_VERSION,
            mic: Some((negotiate, challenge_msg)),
        };
        build_authenticate(&input)
    }
}

/// NEGOTIATE_MESSAGE (MS-NLMP 2.2.1.1) with no domain or workstation.
fn negotiate_message() -> Vec<u8> {
    let mut msg = wire::SIGNATURE.to_vec();
    msg.extend_from_slice(&wire::NEGOTIATE.to_le_bytes());
    msg.extend_from_slice(&CLIENT_FLAGS.to_le_bytes());
    wire::push_field(&mut msg, 0, 40);
    wire::push_field(&mut msg, 0, 40);
    msg.extend_from_slice(&wire::OUR_VERSION);
    msg
}

struct AuthenticateInput<'a> {
    user: &'a str,
    domain: &'a str,
    workstation: &'a str,
    nt_hash: Zeroizing<[u8; 16]>,
    /// The negotiated flags, sent in the message.
    flags: u32,
    server_challenge: [u8; 8],
    target_info: &'a [u8],
    client_challenge: [u8; 8],
    session_key: [u8; 16],
    now: u64,
    version: [u8; 8],
    /// NEGOTIATE and CHALLENGE as exchanged, when a MIC is to be sent.
    mic: Option<(&'a [u8], &'a [u8])>,
}

struct Built {
    message: Vec<u8>,
    exported: [u8; 16],
    flags: u32,
}

/// AUTHENTICATE_MESSAGE (MS-NLMP 2.2.1.3, 3.1.5.1.2) with an NTLMv2
/// response. Payloads go in the order Windows uses: domain, user,
/// workstation, LM response, NT response, encrypted session key.
fn build_authenticate(input: &AuthenticateInput<'_>) -> Result<Built, AuthError> {
    let timestamp = wire::find_av(input.target_info, wire::av::TIMESTAMP)?;
    let time = match timestamp {
        Some(&[a, b, c, d, e, f, g, h]) => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        Some(_) => return Err(AuthError::Malformed),
        None => input.now,
    };

    // The server's AV pairs, plus MsvAvFlags when we send a MIC, then EOL.
    let mut pairs = strip_eol(input.target_info)?;
    if input.mic.is_some() {
        wire::push_av(
            &mut pairs,
            wire::av::FLAGS,
            &wire::AV_FLAG_MIC_PRESENT.to_le_bytes(),
        );
    }
    wire::push_av(&mut pairs, wire::av::EOL, &[]);

    let mut blob = vec![1, 1, 0, 0, 0, 0, 0, 0];
    blob.extend_from_slice(&time.to_le_bytes());
    blob.extend_from_slice(&input.client_challenge);
    blob.extend_from_slice(&[0; 4]);
    blob.extend_from_slice(&pairs);
    blob.extend_from_slice(&[0; 4]);

    let ntowf = keys::ntowf_v2(&input.nt_hash, input.user, input.domain);
    let proof = keys::nt_proof(&ntowf, &input.server_challenge, &blob);
    let nt_response = [proof.as_slice(), &blob].concat();
    // With a server timestamp the LMv2 response is all zeros (MS-NLMP
    // 3.1.5.1.2); without one it is HMAC(NTOWFv2, both challenges) and ours.
    let lm_response = if timestamp.is_some() {
        vec![0u8; 24]
    } else {
        let mac = keys::hmac_md5(
            ntowf.as_slice(),
            &[&input.server_challenge, &input.client_challenge],
        );
        [mac.as_slice(), &input.client_challenge].concat()
    };
    let base = keys::session_base_key(&ntowf, &proof);
    let (exported, encrypted) = if input.flags & flags::KEY_EXCH != 0 {
        (
            input.session_key,
            keys::rc4_16(&base, &input.session_key).to_vec(),
        )
    } else {
        (*base, Vec::new())
    };

    let unicode = input.flags & flags::UNICODE != 0;
    let encode = |s: &str| {
        if unicode {
            text::utf16le(s)
        } else {
            s.bytes().collect()
        }
    };
    let domain = encode(input.domain);
    let user = encode(input.user);
    let workstation = encode(input.workstation);
    let payloads: [&[u8]; 6] = [
        &domain,
        &user,
        &workstation,
        &lm_response,
        &nt_response,
        &encrypted,
    ];
    // Fixed part: signature, type, six fields, flags, version, then the
    // MIC when there is one.
    let mut offset = 64 + input.version.len() + if input.mic.is_some() { 16 } else { 0 };
    let mut fields = Vec::new();
    for p in payloads {
        if p.len() > usize::from(u16::MAX) {
            return Err(AuthError::Malformed);
        }
        fields.push((p.len(), offset));
        offset += p.len();
    }
    // The order of the fields in the header differs from the payload order.
    let header_order = [3, 4, 0, 1, 2, 5];

    let mut msg = wire::SIGNATURE.to_vec();
    msg.extend_from_slice(&wire::AUTHENTICATE.to_le_bytes());
    for i in header_order {
        let (len, off) = fields[i];
        wire::push_field(&mut msg, len, off);
    }
    msg.extend_from_slice(&input.flags.to_le_bytes());
    msg.extend_from_slice(&input.version);
    if input.mic.is_some() {
        msg.extend_from_slice(&[0; 16]);
    }
    for p in payloads {
        msg.extend_from_slice(p);
    }
    if let Some((negotiate, challenge)) = input.mic {
        let mic = keys::hmac_md5(&exported, &[negotiate, challenge, &msg]);
        msg[wire::MIC_OFFSET..wire::MIC_OFFSET + wire::MIC_LEN].copy_from_slice(&mic);
    }
    Ok(Built {
        message: msg,
        exported,
        flags: input.flags,
    })
}

/// The AV pairs up to (not including) MsvAvEOL.
fn strip_eol(pairs: &[u8]) -> Result<Vec<u8>, AuthError> {
    let mut rest = pairs;
    let mut out = Vec::with_capacity(pairs.len() + 8);
    loop {
        let head = rest.get(..4).ok_or(AuthError::Malformed)?;
        let id = u16::from_le_bytes([head[0], head[1]]);
        let len = usize::from(u16::from_le_bytes([head[2], head[3]]));
        if id == wire::av::EOL {
            return Ok(out);
        }
        let pair = rest.get(..4 + len).ok_or(AuthError::Malformed)?;
        out.extend_from_slice(pair);
        rest = &rest[4 + len..];
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{Acceptor, ServerInfo, Step, UserStore};
    use std::path::Path;

    // MS-NLMP 4.2.4: user "User", domain "Domain", password "Password",
    // workstation "COMPUTER", server challenge 0123456789abcdef, client
    // challenge aa..aa, time 0, random session key 55..55.
    const SPEC_FLAGS: u32 = 0xe288_8235;
    const SPEC_TARGET_INFO: [u8; 36] = [
        0x02, 0x00, 0x0c, 0x00, 0x44, 0x00, 0x6f, 0x00, 0x6d, 0x00, 0x61, 0x00, 0x69, 0x00, 0x6e,
        0x00, 0x01, 0x00, 0x0c, 0x00, 0x53, 0x00, 0x65, 0x00, 0x72, 0x00, 0x76, 0x00, 0x65, 0x00,
        0x72, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    // The AUTHENTICATE_MESSAGE of MS-NLMP 4.2.4.3.
    pub(crate) const SPEC_AUTHENTICATE: [u8; 232] = [
        0x4e, 0x54, 0x4c, 0x4d, 0x53, 0x53, 0x50, 0x00, 0x03, 0x00, 0x00, 0x00, 0x18, 0x00, 0x18,
        0x00, 0x6c, 0x00, 0x00, 0x00, 0x54, 0x00, 0x54, 0x00, 0x84, 0x00, 0x00, 0x00, 0x0c, 0x00,
        0x0c, 0x00, 0x48, 0x00, 0x00, 0x00, 0x08, 0x00, 0x08, 0x00, 0x54, 0x00, 0x00, 0x00, 0x10,
        0x00, 0x10, 0x00, 0x5c, 0x00, 0x00, 0x00, 0x10, 0x00, 0x10, 0x00, 0xd8, 0x00, 0x00, 0x00,
        0x35, 0x82, 0x88, 0xe2, 0x05, 0x01, 0x28, 0x0a, 0x00, 0x00, 0x00, 0x0f, 0x44, 0x00, 0x6f,
        0x00, 0x6d, 0x00, 0x61, 0x00, 0x69, 0x00, 0x6e, 0x00, 0x55, 0x00, 0x73, 0x00, 0x65, 0x00,
        0x72, 0x00, 0x43, 0x00, 0x4f, 0x00, 0x4d, 0x00, 0x50, 0x00, 0x55, 0x00, 0x54, 0x00, 0x45,
        0x00, 0x52, 0x00, 0x86, 0xc3, 0x50, 0x97, 0xac, 0x9c, 0xec, 0x10, 0x25, 0x54, 0x76, 0x4a,
        0x57, 0xcc, 0xcc, 0x19, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0x68, 0xcd, 0x0a,
        0xb8, 0x51, 0xe5, 0x1c, 0x96, 0xaa, 0xbc, 0x92, 0x7b, 0xeb, 0xef, 0x6a, 0x1c, 0x01, 0x01,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xaa,
        0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x0c, 0x00,
        0x44, 0x00, 0x6f, 0x00, 0x6d, 0x00, 0x61, 0x00, 0x69, 0x00, 0x6e, 0x00, 0x01, 0x00, 0x0c,
        0x00, 0x53, 0x00, 0x65, 0x00, 0x72, 0x00, 0x76, 0x00, 0x65, 0x00, 0x72, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc5, 0xda, 0xd2, 0x54, 0x4f, 0xc9, 0x79, 0x90, 0x94,
        0xce, 0x1c, 0xe9, 0x0b, 0xc9, 0xd0, 0x3e,
    ];

    #[test]
    fn authenticate_reproduces_ms_nlmp_4_2_4_3() {
        let input = AuthenticateInput {
            user: "User",
            domain: "Domain",
            workstation: "COMPUTER",
            nt_hash: Zeroizing::new(crate::nt_hash("Password")),
            flags: SPEC_FLAGS,
            server_challenge: [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef],
            target_info: &SPEC_TARGET_INFO,
            client_challenge: [0xaa; 8],
            session_key: [0x55; 16],
            now: 0,
            version: [0x05, 0x01, 0x28, 0x0a, 0x00, 0x00, 0x00, 0x0f],
            mic: None,
        };
        let built = build_authenticate(&input).unwrap();
        assert_eq!(built.message, SPEC_AUTHENTICATE);
        assert_eq!(built.exported, [0x55; 16]);
    }

    fn identity(user: &str, password: &str) -> ClientIdentity {
        ClientIdentity {
            user: user.into(),
            domain: String::new(),
            password: password.into(),
            workstation: "BENCH".into(),
        }
    }

    fn random() -> InitiatorRandom {
        InitiatorRandom {
            client_challenge: [0x11; 8],
            session_key: [0x42; 16],
        }
    }

    fn send(step: Result<InitiatorStep, AuthError>) -> Vec<u8> {
        match step {
            Ok(InitiatorStep::Send(token)) => token,
            other => panic!("expected a token, got {other:?}"),
        }
    }

    /// Runs the initiator against our acceptor; returns the acceptor's
    /// last step and the initiator.
    fn exchange(id: ClientIdentity) -> (Step, Initiator) {
        let mut store = UserStore::load(Path::new("/nonexistent/copyless-initiator-test")).unwrap();
        store.add("alice", "Password").unwrap();
        let info = ServerInfo {
            netbios_domain: "WORKGROUP".into(),
            netbios_computer: "NAS".into(),
            dns_domain: "example.org".into(),
            dns_computer: "nas.example.org".into(),
        };
        let mut acc = Acceptor::new([9; 8], 0x01d9_0000_0000_0000, info, false);
        let mut init = Initiator::new(id, random(), 0);
        let first = send(init.step(&[]));
        let Step::Continue(challenge) = acc.step(&first, &store) else {
            panic!("acceptor refused the NegTokenInit");
        };
        let auth = send(init.step(&challenge));
        (acc.step(&auth, &store), init)
    }

    #[test]
    fn acceptor_accepts_the_initiator_and_both_agree_on_the_key() {
        let (step, mut init) = exchange(identity("Alice", "Password"));
        let Step::Done(auth) = step else {
            panic!("expected Done, got {step:?}");
        };
        assert_eq!(auth.user, "Alice");
        // An empty domain is filled from the server's target name.
        assert_eq!(auth.domain, "WORKGROUP");
        assert_eq!(Some(auth.session_key), init.session_key());
        assert_eq!(init.session_key(), Some([0x42; 16]));
        // The acceptor's accept-completed carries a mechListMIC we verify.
        assert_eq!(init.step(&auth.token_out), Ok(InitiatorStep::Done));
        // Nothing is accepted after the end.
        assert_eq!(init.step(&auth.token_out), Err(AuthError::Malformed));
    }

    #[test]
    fn tampered_final_mech_list_mic_fails() {
        let (step, mut init) = exchange(identity("alice", "Password"));
        let Step::Done(auth) = step else {
            panic!("expected Done");
        };
        let mut token = auth.token_out.clone();
        let last = token.len() - 5;
        token[last] ^= 1;
        assert_eq!(init.step(&token), Err(AuthError::LogonFailure));
    }

    #[test]
    fn wrong_password_is_refused_by_the_acceptor() {
        let (step, _) = exchange(identity("alice", "password"));
        assert!(matches!(step, Step::Failed(AuthError::LogonFailure)));
    }

    #[test]
    fn damaged_challenges_are_errors_not_panics() {
        let mut init = Initiator::new(identity("a", "b"), random(), 0);
        send(init.step(&[]));
        let good = {
            let mut acc = Acceptor::new([1; 8], 5, ServerInfo::default(), false);
            let store = UserStore::load(Path::new("/nonexistent/x")).unwrap();
            let first = send(Initiator::new(identity("a", "b"), random(), 0).step(&[]));
            match acc.step(&first, &store) {
                Step::Continue(t) => t,
                other => panic!("{other:?}"),
            }
        };
        for n in 0..good.len() {
            let mut fresh = Initiator::new(identity("a", "b"), random(), 0);
            send(fresh.step(&[]));
            // Truncated tokens fail; they never panic.
            assert!(fresh.step(&good[..n]).is_err(), "length {n}");
        }
        assert!(init.step(&good).is_ok());
    }

    #[test]
    fn strip_eol_keeps_pairs_before_the_end() {
        assert_eq!(
            strip_eol(&SPEC_TARGET_INFO).unwrap(),
            SPEC_TARGET_INFO[..32]
        );
        assert!(strip_eol(&SPEC_TARGET_INFO[..30]).is_err());
    }
}
