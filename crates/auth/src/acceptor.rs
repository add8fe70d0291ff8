//! The server side of SPNEGO with NTLMv2 (MS-SPNG, MS-NLMP 3.2.5) and
//! Kerberos (RFC 4121): a sans-IO state machine fed with the security
//! buffers of SESSION_SETUP requests.

use std::fmt;
use std::sync::Arc;

use zeroize::Zeroizing;

use crate::kerberos::{KerberosService, KrbError, OID_KRB5, OID_MS_KRB5};
use crate::ntlm::keys::{self, Direction, Signer};
use crate::ntlm::{flags, wire};
use crate::spnego::{self, NegState, OID_NTLMSSP};
use crate::{text, Credentials};

/// 100 ns intervals from 1601 (FILETIME) to 1970 (Unix time).
const FILETIME_UNIX_EPOCH: u64 = 116_444_736_000_000_000;

/// Names the server gives itself in the CHALLENGE message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerInfo {
    pub netbios_domain: String,
    pub netbios_computer: String,
    pub dns_domain: String,
    pub dns_computer: String,
}

/// One authentication exchange, from the first SESSION_SETUP to the last.
pub struct Acceptor {
    challenge: [u8; 8],
    now: u64,
    info: ServerInfo,
    allow_guest: bool,
    /// See [`Acceptor::unknown_users_as_guests`].
    unknown_users_as_guests: bool,
    kerberos: Option<Arc<KerberosService>>,
    state: State,
    claim: Option<Claim>,
}

/// Who the client said it was, and how: known once it chose a mechanism,
/// whether or not it then proved it. For the log of logons, which must
/// name the user of a failed logon too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Claim {
    /// The user name as the client spelled it: empty when it sent none
    /// (anonymous), or when it was never read (a ticket that did not
    /// decrypt, a message that did not parse).
    pub user: String,
    /// The domain (NTLM) or realm (Kerberos) as the client sent it.
    pub domain: String,
    pub mechanism: Mechanism,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mechanism {
    /// Nothing was chosen yet.
    #[default]
    Unknown,
    Ntlm,
    Kerberos,
    /// NTLM with no user name and no response (MS-NLMP 3.2.5.1.2).
    Anonymous,
}

enum State {
    /// Nothing received yet.
    Initial,
    /// SPNEGO settled on NTLMSSP but the client sent no NTLM token yet; its
    /// NEGOTIATE comes in the next NegTokenResp.
    AwaitNegotiate { mech_types: Vec<u8> },
    /// The CHALLENGE went out; the AUTHENTICATE comes next.
    AwaitAuthenticate(Box<Pending>),
    /// Done or failed: nothing more is accepted.
    Finished,
}

/// What the AUTHENTICATE is checked against.
struct Pending {
    /// The client's MechTypeList DER when SPNEGO is in use, `None` for raw
    /// NTLMSSP.
    spnego: Option<Vec<u8>>,
    negotiate: Vec<u8>,
    challenge: Vec<u8>,
    flags: u32,
}

/// What one call of [`Acceptor::step`] produced.
#[derive(Debug)]
pub enum Step {
    /// Send this token with STATUS_MORE_PROCESSING_REQUIRED.
    Continue(Vec<u8>),
    /// Authentication succeeded; send `token_out` (may be empty) with STATUS_SUCCESS.
    Done(Authenticated),
    Failed(AuthError),
}

/// The outcome of a successful exchange.
pub struct Authenticated {
    /// The user name as the client spelled it.
    pub user: String,
    /// The domain as the client sent it.
    pub domain: String,
    /// The SMB session key (Session.SessionKey): NTLM's
    /// ExportedSessionKey, or the first 16 bytes of Kerberos' context key.
    /// All zeros for anonymous sessions, which neither sign nor encrypt.
    pub session_key: [u8; 16],
    /// The whole key (Session.FullSessionKey), from which AES-256
    /// encryption keys are derived: 32 bytes for Kerberos with AES-256,
    /// else the same as `session_key`.
    pub full_session_key: Zeroizing<Vec<u8>>,
    /// When the session's authentication runs out (the Kerberos ticket's
    /// end), as a FILETIME like the acceptor's `now`; None never.
    pub expires_at: Option<u64>,
    pub anonymous: bool,
    pub guest: bool,
    pub token_out: Vec<u8>,
}

impl fmt::Debug for Authenticated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The session key stays out of logs.
        f.debug_struct("Authenticated")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("session_key", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .field("anonymous", &self.anonymous)
            .field("guest", &self.guest)
            .field("token_out", &self.token_out.len())
            .finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// undecodable token
    Malformed,
    /// wrong password, unknown user, LM/NTLMv1 response, bad MIC, anonymous when not allowed
    LogonFailure,
    /// a mechanism other than NTLMSSP only
    Unsupported,
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AuthError::Malformed => "malformed authentication token",
            AuthError::LogonFailure => "logon failure",
            AuthError::Unsupported => "no supported authentication mechanism offered",
        })
    }
}

impl std::error::Error for AuthError {}

/// The SPNEGO NegTokenInit sent in the SMB2 NEGOTIATE response's security
/// buffer: NTLMSSP (1.3.6.1.4.1.311.2.2.10), after Kerberos when the
/// server has a keytab (`kerberos`); with Windows' negHints
/// "not_defined_in_RFC4178@please_ignore".
pub fn negotiate_hint(kerberos: bool) -> Vec<u8> {
    spnego::build_hint(kerberos)
}

/// A checked AUTHENTICATE.
struct Verified {
    user: String,
    domain: String,
    /// `None` for anonymous and guest logons.
    exported_key: Option<Zeroizing<[u8; 16]>>,
    flags: u32,
    /// A logon with a user name nobody has, made a guest's.
    guest: bool,
}

type Result<T> = std::result::Result<T, AuthError>;

impl Acceptor {
    /// `challenge`: 8 random bytes from the caller; `now`: current time as Windows FILETIME (100ns since 1601), for the AV pair MsvAvTimestamp. No randomness or clock is read inside (sans-IO).
    pub fn new(challenge: [u8; 8], now: u64, info: ServerInfo, allow_guest: bool) -> Acceptor {
        Acceptor {
            challenge,
            now,
            info,
            allow_guest,
            unknown_users_as_guests: false,
            kerberos: None,
            state: State::Initial,
            claim: None,
        }
    }

    /// An NTLM logon with a user name the store does not hold becomes a
    /// guest's (Samba's `map to guest = bad user`), where guests are
    /// allowed; a known user's wrong password still fails.
    pub fn unknown_users_as_guests(mut self, on: bool) -> Acceptor {
        self.unknown_users_as_guests = on;
        self
    }

    /// Who the client claimed to be so far (see [`Claim`]); None before
    /// it chose a mechanism.
    pub fn claimed(&self) -> Option<&Claim> {
        self.claim.as_ref()
    }

    fn claim(&mut self, mechanism: Mechanism, user: &str, domain: &str) {
        self.claim = Some(Claim {
            user: user.to_string(),
            domain: domain.to_string(),
            mechanism,
        });
    }

    /// Accepts Kerberos too, with this service's keys.
    pub fn with_kerberos(mut self, service: Arc<KerberosService>) -> Acceptor {
        self.kerberos = Some(service);
        self
    }

    /// Feeds the security buffer of one SESSION_SETUP request.
    pub fn step(&mut self, token: &[u8], creds: &dyn Credentials) -> Step {
        let state = std::mem::replace(&mut self.state, State::Finished);
        let result = match state {
            State::Initial => match self.kerberos(token, creds) {
                Some(step) => return step,
                None => self.start(token),
            },
            State::AwaitNegotiate { mech_types } => self.negotiate_in_resp(token, mech_types),
            State::AwaitAuthenticate(pending) => {
                return match self.finish(token, &pending, creds) {
                    Ok(done) => Step::Done(done),
                    Err(err) => Step::Failed(err),
                };
            }
            State::Finished => Err(AuthError::Malformed),
        };
        match result {
            Ok((reply, next)) => {
                // Only NTLMSSP takes more than one round.
                self.claim(Mechanism::Ntlm, "", "");
                self.state = next;
                Step::Continue(reply)
            }
            Err(err) => Step::Failed(err),
        }
    }

    /// A NegTokenInit whose first choice is Kerberos, with its AP-REQ,
    /// is answered in one round: accept-completed, the AP-REP, no
    /// mechListMIC (RFC 4178: none is needed when the client's first
    /// choice and optimistic token were taken). None when the token is
    /// for another mechanism, or names a service this server has no key
    /// for and NTLMSSP is offered too: NTLMSSP is then chosen instead.
    fn kerberos(&mut self, token: &[u8], creds: &dyn Credentials) -> Option<Step> {
        let service = self.kerberos.clone()?;
        if !spnego::is_init(token) {
            return None;
        }
        let init = spnego::parse_init(token).ok()?;
        let first = *init.mech_types.first()?;
        if first != OID_MS_KRB5 && first != OID_KRB5 {
            return None;
        }
        let ap_req = init.mech_token?;
        self.claim(Mechanism::Kerberos, "", "");
        let now_unix = self.now.saturating_sub(FILETIME_UNIX_EPOCH) / 10_000_000;
        let accepted = match service.accept(ap_req, now_unix) {
            Ok(accepted) => accepted,
            Err(KrbError::NoKey) if init.mech_types.contains(&OID_NTLMSSP) => return None,
            Err(KrbError::Malformed) => return Some(Step::Failed(AuthError::Malformed)),
            Err(_) => return Some(Step::Failed(AuthError::LogonFailure)),
        };
        self.claim(Mechanism::Kerberos, &accepted.client, &accepted.realm);
        // The principal logs on as the copyless user of its name, who
        // must exist: Kerberos vouches for the name, the user store for
        // who may use the server.
        if creds.nt_hash(&accepted.client).is_none() {
            return Some(Step::Failed(AuthError::LogonFailure));
        }
        let reply = (!accepted.reply.is_empty()).then_some(accepted.reply.as_slice());
        let token_out = spnego::build_resp(NegState::AcceptCompleted, Some(first), reply, None);
        let full = accepted.session_key;
        Some(Step::Done(Authenticated {
            user: accepted.client,
            domain: accepted.realm,
            session_key: smb_session_key(&full),
            full_session_key: full,
            expires_at: Some(
                accepted
                    .end_time
                    .saturating_mul(10_000_000)
                    .saturating_add(FILETIME_UNIX_EPOCH),
            ),
            anonymous: false,
            guest: false,
            token_out,
        }))
    }

    fn start(&self, token: &[u8]) -> Result<(Vec<u8>, State)> {
        if wire::is_ntlm(token) {
            let pending = self.challenge_for(token, None)?;
            let reply = pending.challenge.clone();
            return Ok((reply, State::AwaitAuthenticate(Box::new(pending))));
        }
        if !spnego::is_init(token) {
            return Err(AuthError::Malformed);
        }
        let init = spnego::parse_init(token)?;
        let position = init
            .mech_types
            .iter()
            .position(|&mech| mech == OID_NTLMSSP)
            .ok_or(AuthError::Unsupported)?;
        let mech_types = init.mech_types_der.to_vec();
        match init.mech_token {
            // The optimistic token belongs to the client's first choice, so
            // it is ours only if that is NTLMSSP.
            Some(ntlm) if position == 0 => {
                let pending = self.challenge_for(ntlm, Some(mech_types))?;
                let reply = spnego::build_resp(
                    NegState::AcceptIncomplete,
                    Some(OID_NTLMSSP),
                    Some(&pending.challenge),
                    None,
                );
                Ok((reply, State::AwaitAuthenticate(Box::new(pending))))
            }
            _ => {
                // Choosing other than the client's first mechanism asks for
                // the mechListMIC exchange (RFC 4178 section 5).
                let state = if position == 0 {
                    NegState::AcceptIncomplete
                } else {
                    NegState::RequestMic
                };
                let reply = spnego::build_resp(state, Some(OID_NTLMSSP), None, None);
                Ok((reply, State::AwaitNegotiate { mech_types }))
            }
        }
    }

    fn negotiate_in_resp(&self, token: &[u8], mech_types: Vec<u8>) -> Result<(Vec<u8>, State)> {
        if !spnego::is_resp(token) {
            return Err(AuthError::Malformed);
        }
        let resp = spnego::parse_resp(token)?;
        let ntlm = resp.response_token.ok_or(AuthError::Malformed)?;
        let pending = self.challenge_for(ntlm, Some(mech_types))?;
        let reply = spnego::build_resp(
            NegState::AcceptIncomplete,
            None,
            Some(&pending.challenge),
            None,
        );
        Ok((reply, State::AwaitAuthenticate(Box::new(pending))))
    }

    /// Answers a NEGOTIATE_MESSAGE with a CHALLENGE_MESSAGE.
    fn challenge_for(&self, negotiate: &[u8], spnego: Option<Vec<u8>>) -> Result<Pending> {
        let client_flags = wire::parse_negotiate(negotiate)?;
        let (target_type, target_name) = self.target();
        let flags = challenge_flags(client_flags) | target_type;
        let target_name = if flags & flags::UNICODE != 0 {
            text::utf16le(target_name)
        } else {
            target_name
                .chars()
                .map(|c| if c.is_ascii() { c as u8 } else { b'?' })
                .collect()
        };
        let challenge =
            wire::build_challenge(flags, &self.challenge, &target_name, &self.target_info());
        Ok(Pending {
            spnego,
            negotiate: negotiate.to_vec(),
            challenge,
            flags,
        })
    }

    /// A standalone server names itself; one given a domain (workgroup)
    /// other than its own name names that.
    fn target(&self) -> (u32, &str) {
        let domain = &self.info.netbios_domain;
        if domain.is_empty() || text::eq_ignore_case(domain, &self.info.netbios_computer) {
            (flags::TARGET_TYPE_SERVER, &self.info.netbios_computer)
        } else {
            (flags::TARGET_TYPE_DOMAIN, domain)
        }
    }

    fn target_info(&self) -> Vec<u8> {
        use wire::av;
        let info = &self.info;
        // Both NetBIOS names are mandatory (MS-NLMP 2.2.2.1).
        let nb_domain = if info.netbios_domain.is_empty() {
            &info.netbios_computer
        } else {
            &info.netbios_domain
        };
        let mut out = Vec::new();
        wire::push_av(&mut out, av::NB_DOMAIN_NAME, &text::utf16le(nb_domain));
        wire::push_av(
            &mut out,
            av::NB_COMPUTER_NAME,
            &text::utf16le(&info.netbios_computer),
        );
        if !info.dns_domain.is_empty() {
            wire::push_av(
                &mut out,
                av::DNS_DOMAIN_NAME,
                &text::utf16le(&info.dns_domain),
            );
        }
        if !info.dns_computer.is_empty() {
            wire::push_av(
                &mut out,
                av::DNS_COMPUTER_NAME,
                &text::utf16le(&info.dns_computer),
            );
        }
        wire::push_av(&mut out, av::TIMESTAMP, &self.now.to_le_bytes());
        wire::push_av(&mut out, av::EOL, &[]);
        out
    }

    fn finish(
        &mut self,
        token: &[u8],
        pending: &Pending,
        creds: &dyn Credentials,
    ) -> Result<Authenticated> {
        let Some(mech_types) = &pending.spnego else {
            if !wire::is_ntlm(token) {
                return Err(AuthError::Malformed);
            }
            let verified = self.verify(token, pending, creds)?;
            return Ok(authenticated(verified, Vec::new()));
        };
        if !spnego::is_resp(token) {
            return Err(AuthError::Malformed);
        }
        let resp = spnego::parse_resp(token)?;
        let ntlm = resp.response_token.ok_or(AuthError::Malformed)?;
        let verified = self.verify(ntlm, pending, creds)?;
        let server_mic = match (resp.mech_list_mic, &verified.exported_key) {
            (Some(client_mic), Some(key)) => {
                Some(mech_list_mic(key, verified.flags, mech_types, client_mic)?)
            }
            // Anonymous NTLM has no keys to sign with; a client that sent
            // no mechListMIC expects none back.
            _ => None,
        };
        let token_out = spnego::build_resp(
            NegState::AcceptCompleted,
            None,
            None,
            server_mic.as_ref().map(|mic| mic.as_slice()),
        );
        Ok(authenticated(verified, token_out))
    }

    /// Checks an AUTHENTICATE_MESSAGE (MS-NLMP 3.2.5.1.2), NTLMv2 only.
    fn verify(
        &mut self,
        msg: &[u8],
        pending: &Pending,
        creds: &dyn Credentials,
    ) -> Result<Verified> {
        let auth = wire::parse_authenticate(msg)?;
        // The client may drop flags it asked for; it cannot add any.
        let flags = if auth.flags == 0 {
            pending.flags
        } else {
            pending.flags & auth.flags
        };
        let unicode = (if auth.flags == 0 {
            pending.flags
        } else {
            auth.flags
        }) & flags::UNICODE
            != 0;
        let decode = |bytes: &[u8]| {
            if unicode {
                text::from_utf16le(bytes).ok_or(AuthError::Malformed)
            } else {
                Ok(text::from_oem(bytes))
            }
        };
        let user = decode(auth.user)?;
        let domain = decode(auth.domain)?;
        let anonymous = user.is_empty() && auth.nt_response.len() <= 1;
        let mechanism = if anonymous {
            Mechanism::Anonymous
        } else {
            Mechanism::Ntlm
        };
        self.claim(mechanism, &user, &domain);

        if anonymous {
            if !self.allow_guest {
                return Err(AuthError::LogonFailure);
            }
            return Ok(Verified {
                user,
                domain,
                exported_key: None,
                flags,
                guest: false,
            });
        }

        // NTProofStr plus the fixed 28 bytes of the blob: anything shorter
        // is LM-only (empty), NTLMv1 (24 bytes) or broken.
        const MIN_NTLMV2: usize = 16 + 28;
        if auth.nt_response.len() < MIN_NTLMV2 {
            return Err(AuthError::LogonFailure);
        }
        let (client_proof, blob) = auth.nt_response.split_at(16);
        // A response whose pairs cannot be read is malformed whoever sent
        // it, before any password is tried (INVALID_PARAMETER, as Windows
        // and Samba answer).
        wire::check_av_pairs(&blob[28..])?;
        let Some(nt_hash) = creds.nt_hash(&user).map(Zeroizing::new) else {
            if self.allow_guest && self.unknown_users_as_guests {
                // Who the guest claimed to be is kept in the claim only.
                return Ok(Verified {
                    user: String::new(),
                    domain,
                    exported_key: None,
                    flags,
                    guest: true,
                });
            }
            return Err(AuthError::LogonFailure);
        };

        let (ntowf, proof) = self
            .domain_candidates(&domain)
            .into_iter()
            .find_map(|candidate| {
                let ntowf = keys::ntowf_v2(&nt_hash, &user, &candidate);
                let proof = keys::nt_proof(&ntowf, &self.challenge, blob);
                keys::ct_eq(&proof, client_proof).then_some((ntowf, proof))
            })
            .ok_or(AuthError::LogonFailure)?;

        let key_exchange_key = keys::session_base_key(&ntowf, &proof);
        let exported_key = if flags & flags::KEY_EXCH != 0 {
            let encrypted: &[u8; 16] = auth
                .encrypted_session_key
                .try_into()
                .map_err(|_| AuthError::Malformed)?;
            keys::rc4_16(&key_exchange_key, encrypted)
        } else {
            key_exchange_key
        };

        let av_pairs = &blob[28..];
        let av_flags = match wire::find_av(av_pairs, wire::av::FLAGS)? {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
            Some(_) => return Err(AuthError::Malformed),
            None => 0,
        };
        if av_flags & wire::AV_FLAG_MIC_PRESENT != 0 {
            check_mic(&exported_key, pending, msg)?;
        }

        Ok(Verified {
            user,
            domain,
            exported_key: Some(exported_key),
            flags,
            guest: false,
        })
    }

    /// The domains a client may have used in NTOWFv2: the one it sent, and
    /// those that clients are known to use instead (Samba accepts the same).
    fn domain_candidates(&self, client_domain: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::with_capacity(5);
        for candidate in [
            client_domain.to_string(),
            text::upcase(client_domain),
            String::new(),
            self.info.netbios_domain.clone(),
            self.info.netbios_computer.clone(),
        ] {
            if !out.contains(&candidate) {
                out.push(candidate);
            }
        }
        out
    }
}

/// Checks the MIC of an AUTHENTICATE_MESSAGE: HMAC_MD5(ExportedSessionKey,
/// NEGOTIATE || CHALLENGE || AUTHENTICATE with the MIC zeroed).
fn check_mic(exported_key: &[u8; 16], pending: &Pending, msg: &[u8]) -> Result<()> {
    let range = wire::MIC_OFFSET..wire::MIC_OFFSET + wire::MIC_LEN;
    let client_mic = msg.get(range.clone()).ok_or(AuthError::LogonFailure)?;
    let mut zeroed = msg.to_vec();
    zeroed[range].fill(0);
    let mic = keys::hmac_md5(
        exported_key,
        &[&pending.negotiate, &pending.challenge, &zeroed],
    );
    if keys::ct_eq(&mic, client_mic) {
        Ok(())
    } else {
        Err(AuthError::LogonFailure)
    }
}

/// Verifies the client's SPNEGO mechListMIC over the MechTypeList it sent and
/// computes ours (MS-SPNG 3.1.5.1, NTLM signatures with sequence number 0).
fn mech_list_mic(
    exported_key: &[u8; 16],
    neg_flags: u32,
    mech_types: &[u8],
    client_mic: &[u8],
) -> Result<[u8; 16]> {
    if neg_flags & flags::EXTENDED_SESSIONSECURITY == 0 {
        // Signatures without extended session security (RC4 and CRC32) are
        // not implemented; every current client negotiates it.
        return Err(AuthError::LogonFailure);
    }
    let expected =
        Signer::new(exported_key, neg_flags, Direction::ClientToServer).mac(0, mech_types);
    if !keys::ct_eq(&expected, client_mic) {
        return Err(AuthError::LogonFailure);
    }
    Ok(Signer::new(exported_key, neg_flags, Direction::ServerToClient).mac(0, mech_types))
}

/// The flags of our CHALLENGE, given the client's NEGOTIATE flags: what it
/// asked for among what we support, plus what a server always sets.
fn challenge_flags(client: u32) -> u32 {
    const ECHOED: u32 = flags::SIGN
        | flags::SEAL
        | flags::ALWAYS_SIGN
        | flags::EXTENDED_SESSIONSECURITY
        | flags::VERSION
        | flags::NEGOTIATE_128
        | flags::KEY_EXCH
        | flags::NEGOTIATE_56;
    let charset = if client & flags::UNICODE != 0 || client & flags::OEM == 0 {
        flags::UNICODE
    } else {
        flags::OEM
    };
    (client & ECHOED) | charset | flags::NTLM | flags::TARGET_INFO | flags::REQUEST_TARGET
}

/// Session.SessionKey from a GSS context key: its first 16 bytes,
/// zero-padded (MS-SMB2 3.3.5.5.3).
pub fn smb_session_key(full: &[u8]) -> [u8; 16] {
    let mut key = [0u8; 16];
    let n = full.len().min(16);
    key[..n].copy_from_slice(&full[..n]);
    key
}

fn authenticated(verified: Verified, token_out: Vec<u8>) -> Authenticated {
    let anonymous = verified.exported_key.is_none() && !verified.guest;
    let session_key = verified.exported_key.as_deref().copied().unwrap_or([0; 16]);
    Authenticated {
        user: verified.user,
        domain: verified.domain,
        session_key,
        full_session_key: Zeroizing::new(session_key.to_vec()),
        expires_at: None,
        anonymous,
        guest: verified.guest,
        token_out,
    }
}
