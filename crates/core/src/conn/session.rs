//! Sessions: SESSION_SETUP (SPNEGO/NTLMv2 through copyless-auth), signing
//! keys per dialect, re-authentication and LOGOFF.

use std::collections::HashMap;
use std::sync::Arc;

use copyless_auth::{Acceptor, AuthError, Authenticated, ServerInfo, Step};
use copyless_crypto::session_keys::signing_key;
use copyless_crypto::{PreauthHash, SigningAlgorithm, SigningKey};
use copyless_proto::command as cmd;
use copyless_proto::header::FLAG_SIGNED;
use copyless_proto::messages::{self, SessionSetupRequest};
use copyless_proto::negotiate::{DIALECT_300, DIALECT_311};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::Writer;
use copyless_vfs::Identity;

use crate::conn::channels::{Binding, Bound};
use crate::conn::connection::{Connection, Reply, Req};
use crate::conn::post::{ChannelKey, ConnectionId, Kind, SessionFacts};
use crate::conn::removals::RemoveBy;
use crate::conn::tree::Tree;
use crate::env::Env;
use crate::event::Event;
use crate::logon::{self, Logon};
use crate::open::Open;
use crate::server::Server;

/// The most channels a session may have, its first connection among
/// them: Windows' limit (MS-SMB2 3.3.5.5 leaves it to the server).
const MAX_CHANNELS: usize = 32;

pub enum AuthState {
    /// Waiting for the next SESSION_SETUP leg.
    InProgress(Box<Acceptor>),
    Valid,
    /// LOGOFF ran; the session stays only until its reply is signed.
    LoggedOff,
}

pub struct Session {
    pub id: u64,
    pub state: AuthState,
    pub user: String,
    pub anonymous: bool,
    pub guest: bool,
    pub signing: Option<Arc<SigningKey>>,
    pub signing_required: bool,
    pub ciphers: Option<crate::conn::encryption::SessionCiphers>,
    /// Every request must come encrypted (SESSION_FLAG_ENCRYPT_DATA).
    pub encrypt_data: bool,
    pub preauth: PreauthHash,
    /// Who the session's file work is done as, once it is authenticated.
    pub who: Identity,
    pub trees: HashMap<u32, Tree>,
    pub opens: HashMap<u64, Open>,
    pub next_tree_id: u32,
    /// Other connections bound to the session, with their keys
    /// (Session.ChannelList less this connection, MS-SMB2 3.3.1.8).
    pub channels: HashMap<ConnectionId, Arc<SigningKey>>,
    /// When the session's Kerberos ticket ends (FILETIME): from then on
    /// it is expired until the client re-authenticates (MS-SMB2
    /// 3.3.5.2.9). None for NTLM, which never expires.
    pub expires_at: Option<u64>,
}

impl Session {
    pub fn is_valid(&self) -> bool {
        matches!(self.state, AuthState::Valid)
    }

    pub fn is_expired(&self, now: u64) -> bool {
        self.expires_at.is_some_and(|end| now >= end)
    }

    /// The key that signs on this connection, or on channel `via`.
    pub(crate) fn key_for(&self, via: Option<ConnectionId>) -> Option<&SigningKey> {
        match via {
            None => self.signing.as_deref(),
            Some(c) => self.channels.get(&c).map(|k| &**k),
        }
    }
}

/// What an expired session may still do (MS-SMB2 3.3.5.2.9): log off,
/// close, and release its locks, so that a client can tidy up before it
/// re-authenticates; ECHO too, as Windows and Samba answer it (smbtorture's
/// smb2.session.expire2 checks this). SESSION_SETUP and CANCEL never get
/// this far.
pub(crate) fn runs_when_expired(req: &Req<'_>) -> bool {
    match req.hdr.command {
        cmd::LOGOFF | cmd::CLOSE | cmd::ECHO => true,
        cmd::LOCK => messages::LockRequest::parse(req.msg).is_ok_and(|lock| {
            lock.locks
                .first()
                .is_some_and(|l| l.flags & messages::LOCKFLAG_UNLOCK != 0)
        }),
        _ => false,
    }
}

/// Who an authenticated session acts as on disk: its user's Unix account
/// (None when the user has none, or it is root), the guest account for guests and
/// anonymous sessions, or the server itself when it cannot change identity.
fn identity(server: &Server, auth: &Authenticated) -> Option<Identity> {
    let config = &server.config;
    if !config.act_as_users {
        return Some(Identity::Server);
    }
    if auth.anonymous || auth.guest {
        return Some(config.guest_identity.clone());
    }
    let account = server.credentials.unix_account(&auth.user)?;
    // Root would pass every permission on every share: no session acts as
    // it, whatever the user store links (the CLI refuses such links).
    if account.uid == 0 {
        return None;
    }
    Some(Identity::unix(
        account.uid,
        account.gid,
        account.groups.clone(),
    ))
}

/// `allow_anonymous`: a new session may be anonymous only when guests
/// are allowed; an established one may always re-authenticate as
/// anonymous (Windows allows it), and then acts as the guest account.
fn new_acceptor(conn: &Connection, env: &mut dyn Env, allow_anonymous: bool) -> Box<Acceptor> {
    let mut challenge = [0u8; 8];
    env.fill_random(&mut challenge);
    let name = conn.server.config.server_name.clone();
    let info = ServerInfo {
        netbios_domain: name.clone(),
        netbios_computer: name.clone(),
        dns_domain: name.to_lowercase(),
        dns_computer: name.to_lowercase(),
    };
    let acceptor = Acceptor::new(challenge, env.now(), info, allow_anonymous)
        .unknown_users_as_guests(conn.server.config.unknown_users_as_guests);
    Box::new(match &conn.server.config.kerberos {
        Some(service) => acceptor.with_kerberos(service.clone()),
        None => acceptor,
    })
}

impl Connection {
    pub(crate) fn session_setup(
        &mut self,
        req: &Req<'_>,
        reply: &mut Reply,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        let ss = SessionSetupRequest::parse(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if ss.flags & messages::SESSION_FLAG_BINDING != 0 {
            let session = self.check_binding(req)?;
            return self.bind(req, &ss, session, reply, w, env);
        }
        let sid = if req.hdr.session_id == 0 {
            if self.live_sessions() as u32 >= self.server.limits().max_sessions {
                return Err(status::INSUFFICIENT_RESOURCES);
            }
            let id = self.server.next_id();
            let mut preauth = self.preauth.clone();
            if self.dialect != DIALECT_311 {
                preauth = PreauthHash::new();
            }
            let acceptor = new_acceptor(self, env, self.server.config.allow_guest);
            self.sessions.insert(
                id,
                Session {
                    id,
                    state: AuthState::InProgress(acceptor),
                    user: String::new(),
                    anonymous: false,
                    guest: false,
                    signing: None,
                    signing_required: false,
                    ciphers: None,
                    encrypt_data: false,
                    preauth,
                    trees: HashMap::new(),
                    opens: HashMap::new(),
                    next_tree_id: 1,
                    who: Identity::Server,
                    channels: HashMap::new(),
                    expires_at: None,
                },
            );
            id
        } else {
            let id = req.hdr.session_id;
            let acceptor = match self.sessions.get(&id) {
                None => return Err(status::USER_SESSION_DELETED),
                Some(s) if matches!(s.state, AuthState::LoggedOff) => {
                    return Err(status::USER_SESSION_DELETED)
                }
                Some(s) if s.is_valid() => Some(new_acceptor(self, env, true)),
                Some(_) => None,
            };
            if let (Some(a), Some(s)) = (acceptor, self.sessions.get_mut(&id)) {
                // Re-authentication of an established session.
                s.state = AuthState::InProgress(a);
                if self.dialect == DIALECT_311 {
                    s.preauth = self.preauth.clone();
                }
            }
            id
        };
        reply.session_id = sid;
        reply.header_session_id = sid;
        let dialect = self.dialect;
        let credentials = self.server.credentials.clone();
        let signing_required_cfg =
            self.server.config.signing_required || ss.security_mode & 0x2 != 0;
        let signing_algorithm = self.signing_algorithm;
        let effective_algorithm = self.effective_signing_algorithm();
        let home = self.id();
        let cipher = self.cipher;
        let (encrypt_wanted, reject_unencrypted) = (
            self.server.config.encrypt_data,
            self.server.config.reject_unencrypted,
        );
        let session = self
            .sessions
            .get_mut(&sid)
            .ok_or(status::USER_SESSION_DELETED)?;
        if dialect == DIALECT_311 {
            session.preauth.update(req.msg);
        }
        let AuthState::InProgress(acceptor) = &mut session.state else {
            return Err(status::INTERNAL_ERROR);
        };
        let was_valid = session.signing.is_some();
        let step = acceptor.step(ss.security_buffer, credentials.as_ref());
        self.claim = acceptor.claimed().cloned();
        match step {
            Step::Continue(token) => {
                messages::write_session_setup_response(w, 0, &token);
                if dialect == DIALECT_311 {
                    reply.preauth_update = Some(sid);
                }
                Ok(status::MORE_PROCESSING_REQUIRED)
            }
            Step::Done(auth) => {
                let mut flags = 0;
                if auth.anonymous {
                    flags |= messages::SESSION_FLAG_IS_NULL;
                } else if auth.guest {
                    flags |= messages::SESSION_FLAG_IS_GUEST;
                }
                if !was_valid {
                    let Some(who) = identity(&self.server, &auth) else {
                        // A user the server cannot act as on disk.
                        self.sessions.remove(&sid);
                        return Err(status::LOGON_FAILURE);
                    };
                    session.who = who;
                    session.user = auth.user.clone();
                    session.anonymous = auth.anonymous;
                    session.guest = auth.guest;
                    if !auth.anonymous && !auth.guest {
                        session.signing = Some(Arc::new(signing_key(
                            dialect,
                            signing_algorithm,
                            &auth.session_key,
                            session.preauth.value(),
                        )));
                        session.signing_required = signing_required_cfg;
                        session.ciphers = cipher.and_then(|c| {
                            crate::conn::encryption::SessionCiphers::derive(
                                dialect,
                                c,
                                &auth.session_key,
                                &auth.full_session_key,
                                session.preauth.value(),
                            )
                        });
                        session.encrypt_data =
                            session.ciphers.is_some() && (encrypt_wanted || reject_unencrypted);
                    }
                    if reject_unencrypted && !session.encrypt_data {
                        self.sessions.remove(&sid);
                        return Err(status::ACCESS_DENIED);
                    }
                } else if !auth.user.eq_ignore_ascii_case(&session.user)
                    || auth.anonymous != session.anonymous
                    || auth.guest != session.guest
                {
                    // Re-authentication as someone else: opens and tree
                    // connects stay, the keys stay (MS-SMB2 3.3.5.5.3),
                    // and what is done from now on is done as the new user.
                    let Some(who) = identity(&self.server, &auth) else {
                        self.remove_session(sid, true, RemoveBy::Call);
                        return Err(status::LOGON_FAILURE);
                    };
                    session.who = who;
                    session.user = auth.user.clone();
                    session.anonymous = auth.anonymous;
                    session.guest = auth.guest;
                    crate::conn::tree::reidentify_trees(&self.server, session);
                    self.server.sessions.remove(sid);
                }
                session.state = AuthState::Valid;
                session.expires_at = auth.expires_at;
                let named = !auth.anonymous && !auth.guest;
                if let Some(key) = session.signing.clone().filter(|_| named) {
                    let facts = SessionFacts {
                        home,
                        user: auth.user.clone(),
                        decrypt: session.ciphers.as_ref().map(|c| c.decrypt.clone()),
                        dialect,
                        algorithm: effective_algorithm,
                        cipher,
                        signing: key,
                        channels: Default::default(),
                    };
                    self.server.sessions.insert(sid, facts);
                }
                if ss.previous_session_id != 0 && ss.previous_session_id != sid {
                    self.end_previous_session(ss.previous_session_id, &auth.user);
                }
                let session = self
                    .sessions
                    .get_mut(&sid)
                    .ok_or(status::USER_SESSION_DELETED)?;
                if session.encrypt_data {
                    flags |= messages::SESSION_FLAG_ENCRYPT_DATA;
                }
                reply.sign = session.signing.is_some();
                messages::write_session_setup_response(w, flags, &auth.token_out);
                Ok(status::SUCCESS)
            }
            Step::Failed(e) => {
                if !was_valid {
                    self.sessions.remove(&sid);
                } else {
                    self.remove_session(sid, true, RemoveBy::Call);
                }
                Err(match e {
                    AuthError::Malformed => status::INVALID_PARAMETER,
                    AuthError::Unsupported => status::NOT_SUPPORTED,
                    _ => status::LOGON_FAILURE,
                })
            }
        }
    }

    /// The session a bind of this connection names, or why it cannot
    /// bind, in the order of checks that gives Windows' and Samba's
    /// answers to smbtorture's smb2.session.bind_negative tests (the
    /// algorithm checks come before the dialect's, and a different
    /// ClientGuid may bind).
    fn check_binding(&self, req: &Req<'_>) -> Result<SessionFacts, NtStatus> {
        let sid = req.hdr.session_id;
        if sid == 0 {
            return Err(status::INVALID_PARAMETER);
        }
        if self.sessions.contains_key(&sid) || self.bound.contains_key(&sid) {
            // Already a channel of this connection (MS-SMB2 3.3.5.5).
            return Err(status::REQUEST_NOT_ACCEPTED);
        }
        let session = self
            .server
            .sessions
            .facts(sid)
            .ok_or(status::USER_SESSION_DELETED)?;
        let gmac = SigningAlgorithm::AesGmac;
        let ours = self.effective_signing_algorithm();
        if session.algorithm == gmac && ours != gmac {
            Err(status::REQUEST_OUT_OF_SEQUENCE)
        } else if ours == gmac && session.algorithm != gmac {
            Err(status::NOT_SUPPORTED)
        } else if self.dialect < DIALECT_300 || !self.server.config.multichannel {
            Err(status::REQUEST_NOT_ACCEPTED)
        } else if req.hdr.flags & FLAG_SIGNED == 0
            || self.dialect != session.dialect
            || self.cipher != session.cipher
        {
            Err(status::INVALID_PARAMETER)
        } else {
            Ok(session)
        }
    }

    /// Authenticates a bind on this connection: the session's own user
    /// must log on again here, and the channel then signs with a key of
    /// its own (MS-SMB2 3.3.5.5.3). A failure leaves the session as it
    /// was; its replies are signed with the session's key.
    fn bind(
        &mut self,
        req: &Req<'_>,
        ss: &SessionSetupRequest<'_>,
        session: SessionFacts,
        reply: &mut Reply,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        let sid = req.hdr.session_id;
        reply.session_id = sid;
        reply.header_session_id = sid;
        if !self.binding.contains_key(&sid) {
            let acceptor = new_acceptor(self, env, false);
            let preauth = if self.dialect == DIALECT_311 {
                self.preauth.clone()
            } else {
                PreauthHash::new()
            };
            self.binding.insert(sid, Binding { acceptor, preauth });
        }
        let credentials = self.server.credentials.clone();
        let Some(binding) = self.binding.get_mut(&sid) else {
            return Err(status::INTERNAL_ERROR);
        };
        if self.dialect == DIALECT_311 {
            binding.preauth.update(req.msg);
        }
        let step = binding
            .acceptor
            .step(ss.security_buffer, credentials.as_ref());
        self.claim = binding.acceptor.claimed().cloned();
        match step {
            Step::Continue(token) => {
                messages::write_session_setup_response(w, 0, &token);
                if self.dialect == DIALECT_311 {
                    reply.preauth_update = Some(sid);
                }
                Ok(status::MORE_PROCESSING_REQUIRED)
            }
            Step::Done(auth) => {
                let Some(binding) = self.binding.remove(&sid) else {
                    return Err(status::INTERNAL_ERROR);
                };
                if auth.anonymous || auth.guest || !auth.user.eq_ignore_ascii_case(&session.user) {
                    // Someone else than the session's user (MS-SMB2
                    // 3.3.5.5.3; Windows and Samba answer so).
                    return Err(status::ACCESS_DENIED);
                }
                // smbtorture smb2.multichannel.generic.num_channels.
                let Some(slot) = session.channels.take(MAX_CHANNELS - 1) else {
                    return Err(status::INSUFFICIENT_RESOURCES);
                };
                let key = Arc::new(signing_key(
                    self.dialect,
                    self.effective_signing_algorithm(),
                    &auth.session_key,
                    binding.preauth.value(),
                ));
                self.bound.insert(
                    sid,
                    Bound {
                        home: session.home,
                        decrypt: session.decrypt,
                        key: key.clone(),
                        _slot: slot,
                    },
                );
                let channel = self.id();
                self.post(
                    session.home,
                    Kind::ChannelAdded {
                        session_id: sid,
                        channel,
                        key: ChannelKey(key.clone()),
                    },
                );
                reply.sign_key = Some(key);
                messages::write_session_setup_response(w, 0, &auth.token_out);
                Ok(status::SUCCESS)
            }
            Step::Failed(e) => {
                self.binding.remove(&sid);
                Err(match e {
                    AuthError::Malformed => status::INVALID_PARAMETER,
                    AuthError::Unsupported => status::NOT_SUPPORTED,
                    _ => status::LOGON_FAILURE,
                })
            }
        }
    }

    /// What a SESSION_SETUP is for, judged before it runs (it may remove
    /// the session it names).
    pub(crate) fn logon_kind(&self, req: &Req<'_>) -> logon::Kind {
        let binding = SessionSetupRequest::parse(req.msg)
            .is_ok_and(|ss| ss.flags & messages::SESSION_FLAG_BINDING != 0);
        let established = |s: &Session| s.signing.is_some() || s.anonymous || s.guest;
        if binding {
            logon::Kind::Bind
        } else if self.sessions.get(&req.session_id).is_some_and(established) {
            logon::Kind::Reauth
        } else {
            logon::Kind::New
        }
    }

    /// A SESSION_SETUP was answered: unless another round follows, its
    /// logon goes out as an event, with who the client claimed to be.
    pub(crate) fn logon_ended(
        &mut self,
        kind: logon::Kind,
        session_id: u64,
        result: &Result<NtStatus, NtStatus>,
    ) {
        let claim = self.claim.take().unwrap_or_default();
        let status = match *result {
            Ok(status::MORE_PROCESSING_REQUIRED) => return,
            Ok(s) | Err(s) => s,
        };
        let guest =
            status == status::SUCCESS && self.sessions.get(&session_id).is_some_and(|s| s.guest);
        if status == status::SUCCESS && kind == logon::Kind::New {
            self.make_home(session_id);
        }
        let mechanism = if guest {
            logon::Mechanism::Guest
        } else {
            claim.mechanism.into()
        };
        self.events.push(Event::Logon(Logon {
            client: self.client_addr,
            user: claim.user,
            domain: claim.domain,
            mechanism,
            kind,
            status,
        }));
    }

    /// A user who logs on has a home folder from then on (`[homes]`), as
    /// pam_mkhomedir makes one at a login: made now, if it is not there.
    fn make_home(&self, session_id: u64) {
        let Some(session) = self.sessions.get(&session_id) else {
            return;
        };
        if let (Some(homes), false) = (self.server.homes(), session.anonymous || session.guest) {
            homes.home(&self.server, &session.user, &session.who);
        }
    }

    pub(crate) fn logoff(&mut self, req: &Req<'_>, w: &mut Writer) -> Result<NtStatus, NtStatus> {
        messages::parse_empty(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
        if let Some(s) = self.sessions.get_mut(&req.session_id) {
            let opens = s.opens.drain().map(|(_, o)| o).collect();
            s.trees.clear();
            s.state = AuthState::LoggedOff;
            let user = s.user.clone();
            self.server.sessions.remove(req.session_id);
            self.end_channels(req.session_id);
            // Durable opens outlive a logoff (MS-SMB2 3.3.5.6).
            self.park_or_release(req.session_id, &user, opens, RemoveBy::Here);
        }
        if !self.logged_off.contains(&req.session_id) {
            self.logged_off.push(req.session_id);
        }
        messages::write_empty_response(w);
        Ok(status::SUCCESS)
    }

    /// The client reconnected and names the session it had before
    /// (MS-SMB2 3.3.5.5.3): when the same user holds it, it ends, on this
    /// connection now or on its own by a letter, so that its opens no
    /// longer stand in the way of the new session's. Another user's
    /// session is left alone.
    fn end_previous_session(&mut self, previous: u64, user: &str) {
        let Some(owner) = self.server.sessions.take_if_user(previous, user) else {
            return;
        };
        self.post(
            owner,
            Kind::EndSession {
                session_id: previous,
            },
        );
    }

    /// Closes everything a session holds and ends it, as a logoff does:
    /// it is kept a while with its keys, so that what its closing ends
    /// (a waiting change notification) is answered signed, and a late
    /// request on it gets a signed USER_SESSION_DELETED. With
    /// `keep_durable`, durable opens are kept for their user to reclaim.
    pub(crate) fn remove_session(&mut self, sid: u64, keep_durable: bool, how: RemoveBy) {
        self.server.sessions.remove(sid);
        self.end_channels(sid);
        let Some(s) = self.sessions.get_mut(&sid) else {
            return;
        };
        let opens = s.opens.drain().map(|(_, o)| o).collect();
        s.trees.clear();
        s.state = AuthState::LoggedOff;
        if !self.logged_off.contains(&sid) {
            self.logged_off.push(sid);
        }
        if keep_durable {
            let user = s.user.clone();
            self.park_or_release(sid, &user, opens, how);
        } else {
            self.release_all(sid, opens, how);
        }
        self.publish_status();
    }
}
