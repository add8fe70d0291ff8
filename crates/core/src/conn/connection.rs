//! One client connection: negotiation state, sessions, credits, signing and
//! compounding. Bytes of one received SMB message go in through
//! [`Connection::handle`]; the reply frame comes out. No I/O happens here
//! but through the share's VFS.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use copyless_crypto::{PreauthHash, SigningAlgorithm, SigningKey};
use copyless_proto::command as cmd;
use copyless_proto::header::{
    Header, FLAG_ASYNC_COMMAND, FLAG_RELATED_OPERATIONS, FLAG_SERVER_TO_REDIR, FLAG_SIGNED,
};
use copyless_proto::messages::{self, FileId};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::transform::{Sealed, TRANSFORM_HEADER_LEN};
use copyless_proto::{smb1, Writer, HEADER_LEN};
use copyless_vfs::Identity;

use crate::audit::Audited;
use crate::breaks::Notice;
use crate::conn::channels::{Binding, Bound, Relay, Via};
use crate::conn::credits::CreditWindow;
use crate::conn::pending::{Answer, Awaits, Pending};
use crate::conn::post::{ConnectionId, Kind, Letter, Message};
use crate::conn::removals::RemoveBy;
use crate::conn::session::Session;
use crate::conn::tree::{Tree, TreeKind};
use crate::conn::waiting::{Hold, Wait, Waiting};
use crate::env::Env;
use crate::event::Event;
use crate::file_table::Seen;
use crate::intent::{Call, Intent, Token};
use crate::limits::Limits;
use crate::open::{FileOpen, OpenKind};
use crate::server::Server;

/// The largest SMB2 message the Direct TCP transport can carry (a 24-bit
/// length), less room for the transform header that encrypts it.
pub const MAX_REPLY_FRAME: usize = 0x00FF_FFFF - 64;

/// Room a reply needs beyond the payload its credit charge pays for: the
/// header, the command's fixed part, error data, compound padding.
const REPLY_OVERHEAD: usize = 1024;

/// How often sessions are checked against the user store when idle.
const SESSION_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// What [`Connection::unseal`] made of a frame: only it makes one, so
/// that no frame is handled as decrypted that was not.
#[derive(Clone, Copy, Debug)]
pub struct Unsealed(Opening);

#[derive(Clone, Copy, Debug)]
enum Opening {
    /// Not sealed, or relayed as it came: handled as it is.
    AsItCame,
    /// Decrypted where it lies with session `sid`'s key.
    Opened { sid: u64 },
    /// Sealed, and did not open: handling it ends the connection.
    Refused,
}

/// What the engine does after a message or a completion.
#[derive(Debug, Default)]
pub struct Output {
    /// SMB2 messages to send, each a whole transport frame payload (the
    /// engine adds the 4-byte length prefix).
    pub frames: Vec<Vec<u8>>,
    /// Data I/O to perform; each result goes back through
    /// [`Connection::complete`], which finishes the reply waiting for it.
    pub intents: Vec<Intent>,
    /// Other filesystem calls to make; each result goes back through
    /// [`Connection::complete`] too.
    pub calls: Vec<Call>,
    /// Intents and calls whose requests the client cancelled: the engine
    /// stops them if it can (completing them with `VfsError::Cancelled`),
    /// and completes them as usual if it cannot.
    pub cancel: Vec<Token>,
    /// Letters for other connections, to be handed to them before
    /// anything they receive after this output's frames are sent.
    pub messages: Vec<Message>,
    /// The last frame is a READ reply whose data the engine moved aside
    /// (a [`crate::Completion::ReadAside`]): this many bytes of it follow
    /// the frame on the wire, and the frame's transport length counts
    /// them. Only [`Connection::complete`] sets it, and then `frames`
    /// holds that one frame.
    pub aside: Option<usize>,
    /// Close the connection after sending the frames.
    pub disconnect: bool,
    /// One entry per request handled, in order, for the engine's tracing.
    pub requests: Vec<RequestTrace>,
    /// What happened that the engine counts and logs (event.rs).
    pub events: Vec<Event>,
}

/// What tracing needs to know of one handled request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestTrace {
    pub command: u16,
    pub message_id: u64,
    /// The reply's status; 0 when no reply was sent (CANCEL).
    pub status: u32,
    /// Index into `Server::shares` of the request's tree; None for IPC$ or
    /// no tree.
    pub share: Option<usize>,
    /// The user of the request's session, once authenticated.
    pub user: Option<String>,
}

/// One request of a compound, as dispatch sees it.
pub(crate) struct Req<'a> {
    pub msg: &'a [u8],
    pub hdr: Header,
    /// After compound inheritance.
    pub session_id: u64,
    pub tree_id: u32,
    /// The request arrived inside a transform header (decrypted).
    pub encrypted: bool,
    /// Where `msg` starts in the frame the engine passed in; None when the
    /// bytes are the core's own (decrypted, or kept while the compound
    /// waited).
    pub frame_at: Option<usize>,
    /// The bound channel the request came on (channels.rs).
    pub via: Option<ConnectionId>,
}

impl<'a> Req<'a> {
    /// The request `msg` of a compound that was kept (`begun` of
    /// `chain`), to run it again.
    pub(crate) fn kept(msg: &'a [u8], begun: &Begun, chain: &Chain) -> Req<'a> {
        Req {
            msg,
            hdr: begun.hdr,
            session_id: begun.reply.session_id,
            tree_id: begun.reply.tree_id,
            encrypted: chain.sealed.is_some(),
            frame_at: None,
            via: chain.via.as_ref().map(|v| v.to),
        }
    }
}

/// Per-reply decisions taken while handling a request.
pub(crate) struct Reply {
    /// The ids the request runs under (after compound inheritance): they
    /// choose the signing key and carry over to related requests.
    pub session_id: u64,
    pub tree_id: u32,
    /// The ids the reply header shows: those of the request, unless the
    /// command assigns new ones (SESSION_SETUP, TREE_CONNECT).
    pub header_session_id: u64,
    pub header_tree_id: u32,
    /// Sign this reply (when the session has a key).
    pub sign: bool,
    /// Feed this reply into that session's pre-authentication hash.
    pub preauth_update: Option<u64>,
    /// Feed this reply into the connection's pre-authentication hash.
    pub preauth_connection: bool,
    pub disconnect: bool,
    /// No reply at all (CANCEL).
    pub suppress: bool,
    /// The session whose key signs this reply, if it is signed.
    pub sign_sid: Option<u64>,
    /// Sign the reply with this key rather than a session's here: that of
    /// a session another connection holds, which signed the request (a
    /// refused bind, MS-SMB2 3.3.4.1.1), or a new channel's.
    pub sign_key: Option<Arc<SigningKey>>,
    /// The request was signed for a session this connection does not hold
    /// (another connection's, or none): the reply says it is signed and
    /// echoes the request's signature, as Samba and ksmbd do, since a
    /// client drops a connection whose reply to a signed request is not.
    pub echo_signature: bool,
    /// The reply waits for this data I/O.
    pub wait: Option<Wait>,
    /// The request goes pending under this AsyncId, until what it awaits
    /// happens (see pending.rs).
    pub pend: Option<(u64, Awaits)>,
    /// The request runs again once what stands in its way is gone (see
    /// waiting.rs).
    pub hold: Option<Hold>,
    /// What the share's audit trail may keep of the request, once its
    /// final status is known.
    pub audit: Option<Audited>,
}

/// What signs a reply placed in a chain.
pub(crate) enum Signer {
    /// The key of this session here, or of its channel when relayed.
    Session(u64),
    Key(Arc<SigningKey>),
}

impl Reply {
    pub(crate) fn signer(&self) -> Option<Signer> {
        match (&self.sign_key, self.sign_sid) {
            (Some(k), _) => Some(Signer::Key(k.clone())),
            (None, Some(sid)) => Some(Signer::Session(sid)),
            (None, None) => None,
        }
    }
}

/// A request's reply as far as it is decided before its body is known.
pub(crate) struct Begun {
    pub hdr: Header,
    pub reply: Reply,
    pub granted: u16,
}

/// What became of one request of a compound.
enum Step {
    /// No reply (CANCEL).
    Silent,
    /// The connection ends now (a message id outside the credit window).
    Drop(Reply),
    Reply(Vec<u8>, Reply),
    /// The reply waits for an intent.
    Wait(Begun, Wait),
    /// The request is answered later; an interim response goes now.
    Pend(Begun, u64, Awaits),
    /// The request runs again later.
    Hold(Begun, Hold),
}

/// The replies of one received frame, built in order into one frame.
pub(crate) struct Chain {
    pub out: Vec<u8>,
    /// Where the last reply placed in `out` starts, and what signs it; it
    /// is signed once the next is linked to it.
    pub prev: Option<(usize, Option<Signer>)>,
    /// Messages of the compound handled so far.
    pub handled: usize,
    pub compound: Compound,
    pub disconnect: bool,
    /// The request came sealed with this session's key; so go the replies.
    pub sealed: Option<u64>,
    /// Credits the replies grant: usable once the frame goes out.
    pub granted: u64,
    /// The requests came from a bound channel, where the replies go.
    pub via: Option<Via>,
}

impl Chain {
    pub(crate) fn new(sealed: Option<u64>) -> Chain {
        Chain {
            out: Vec::new(),
            prev: None,
            handled: 0,
            compound: Compound::default(),
            disconnect: false,
            sealed,
            granted: 0,
            via: None,
        }
    }
}

/// State carried from one request of a compound to the next.
#[derive(Default)]
pub(crate) struct Compound {
    pub session_id: u64,
    pub tree_id: u32,
    pub file_id: Option<FileId>,
    /// The status of the previous request: a related request that names
    /// "the previous file" fails with it when there is no such file.
    pub last_status: NtStatus,
    /// This request is related to the previous one.
    pub related: bool,
    /// This request is not the last of its compound.
    pub more_follow: bool,
    /// The session that signed the previous reply of the compound: a
    /// reply with no session of its own is signed with its key, as Samba
    /// does, so the client can trust the whole chain.
    pub sign_sid: Option<u64>,
    /// Bytes the reply to this request may still take in the compound's
    /// frame.
    pub room: usize,
}

/// One client connection's protocol state, driven by an engine and never
/// driving: it reads no socket, clock or file of its own accord. An
/// engine calls, in this order over a connection's life:
///
/// 1. [`Connection::new`] when a client connects, with the shared
///    [`Server`];
/// 2. [`Connection::handle`] (or [`Connection::handle_in_place`], or
///    [`Connection::unseal`] then [`Connection::handle_unsealed`]) for
///    each received transport frame, [`Connection::receive`] for each
///    [`Letter`](crate::Letter) another connection posted, and
///    [`Connection::complete`] for each [`Intent`] and [`Call`] it
///    carried out; each returns an [`Output`]: frames to send, intents
///    and calls to perform, those to stop, letters to post, whether to disconnect, and what to trace;
/// 3. [`Connection::handle_timeout`] once [`Connection::timeout`] has
///    passed without a frame;
/// 4. [`Connection::shutdown`] when the socket is gone, which closes every
///    open and returns the letters that wake what they held up elsewhere.
///
/// Until every filesystem call leaves as an intent, some requests, letters
/// and timeouts still reach the filesystem while they are handled:
/// [`Connection::may_block`] (of a sealed frame, once unsealed,
/// [`Connection::unsealed_may_block`]),
/// [`Letter::may_block`](crate::Letter::may_block) and
/// [`Connection::timeout_may_block`] say which, so that an engine that
/// serves sockets on one thread runs those elsewhere.
pub struct Connection {
    pub(crate) server: Arc<Server>,
    id: ConnectionId,
    pub(crate) client_addr: SocketAddr,
    pub(crate) local_addr: SocketAddr,
    /// 0 until NEGOTIATE picked a dialect; 0x02FF after an SMB1 upgrade.
    pub(crate) dialect: u16,
    pub(crate) client_guid: [u8; 16],
    pub(crate) client_security_mode: u16,
    pub(crate) client_capabilities: u32,
    pub(crate) client_dialects: Vec<u16>,
    pub(crate) server_security_mode: u16,
    pub(crate) server_capabilities: u32,
    pub(crate) signing_algorithm: SigningAlgorithm,
    /// The cipher negotiated for SMB 3.x encryption, if any.
    pub(crate) cipher: Option<copyless_crypto::CipherId>,
    pub(crate) preauth: PreauthHash,
    pub(crate) credits: CreditWindow,
    pub(crate) sessions: HashMap<u64, Session>,
    pub(crate) max_io: u32,
    /// The limits in force when the connection was made: its message
    /// sizes, the I/O size it offers and its credits stay these across a
    /// reload (limits.rs). Counts are checked against `server.limits()`.
    pub(crate) made_with: Limits,
    /// Sessions that logged off, oldest first. They are kept, with their
    /// keys, so that a late request on them gets a signed
    /// STATUS_USER_SESSION_DELETED, as Samba does; only a few are kept.
    pub(crate) logged_off: Vec<u64>,
    /// The user store's generation when sessions were last checked
    /// against it.
    credentials_generation: u64,
    /// Requests whose replies wait for intents, by the intent's token;
    /// as many as the credit window lets the client send at once.
    pub(crate) waiting: HashMap<Token, Waiting>,
    pub(crate) next_token: Token,
    /// The last AsyncId given to an interim response.
    pub(crate) last_async_id: u64,
    /// Tokens cancelled while handling, for the output.
    pub(crate) cancelled: Vec<Token>,
    /// Letters for other connections, for the output.
    pub(crate) outbox: Vec<Message>,
    /// Events for the output.
    pub(crate) events: Vec<Event>,
    /// Who the client of the SESSION_SETUP being handled claimed to be,
    /// once its acceptor knew (session.rs), for its logon event.
    pub(crate) claim: Option<copyless_auth::Claim>,
    /// Requests that had an interim response, by AsyncId.
    pub(crate) pending: HashMap<u64, Pending>,
    /// Their final responses, decided since the last output.
    pub(crate) answers: Vec<Answer>,
    /// Held requests to run again (waiting.rs), woken since the last
    /// output.
    pub(crate) retries: Vec<Token>,
    /// Oplock break notifications to send (breaks.rs).
    pub(crate) notices: Vec<Notice>,
    /// A held request is running again (waiting.rs).
    pub(crate) retrying: bool,
    /// A request was held: its interim response goes with this output.
    pub(crate) interim_now: bool,
    /// Changes this connection's watching opens are to be told of
    /// (notify.rs).
    pub(crate) seen: Vec<Seen>,
    /// Changes on their way to this connection's watchers.
    pub(crate) sightings: crate::notify_sight::Sightings,
    /// Closes whose file's removal is a call under way.
    pub(crate) removals: crate::conn::removals::Removals,
    /// The time (FILETIME) when the connection last heard from the
    /// client or its timer: when opens kept after it ends expire.
    pub(crate) clock: u64,
    /// Sessions of other connections this one is a channel of, and binds
    /// under way (channels.rs).
    pub(crate) bound: HashMap<u64, Bound>,
    pub(crate) binding: HashMap<u64, Binding>,
    /// Sessions this connection was a channel of until they ended, with
    /// the channel's key, last few only: a late request on one is refused
    /// signed, as on a session that logged off here.
    pub(crate) ended_channels: Vec<(u64, Arc<SigningKey>)>,
    /// Bytes of frames relayed to each home and not yet done there.
    pub(crate) relaying: HashMap<ConnectionId, usize>,
    /// Frames bound channels relayed here, to run.
    pub(crate) relays: Vec<Relay>,
    /// Replies homes sent back for what this connection relayed, to send.
    pub(crate) relayed: Vec<Vec<u8>>,
    pub(crate) relayed_disconnect: bool,
}

impl Connection {
    pub fn new(server: Arc<Server>, client_addr: SocketAddr, local_addr: SocketAddr) -> Self {
        let made_with = server.limits();
        Connection {
            id: server.next_id(),
            server,
            client_addr,
            local_addr,
            dialect: 0,
            client_guid: [0; 16],
            client_security_mode: 0,
            client_capabilities: 0,
            client_dialects: Vec::new(),
            server_security_mode: 0,
            server_capabilities: 0,
            signing_algorithm: SigningAlgorithm::AesCmac,
            cipher: None,
            preauth: PreauthHash::new(),
            credits: CreditWindow::new(made_with.max_credits),
            sessions: HashMap::new(),
            max_io: 65536,
            made_with,
            logged_off: Vec::new(),
            credentials_generation: 0,
            waiting: HashMap::new(),
            next_token: 0,
            last_async_id: 0,
            cancelled: Vec::new(),
            outbox: Vec::new(),
            events: Vec::new(),
            claim: None,
            pending: HashMap::new(),
            answers: Vec::new(),
            retries: Vec::new(),
            notices: Vec::new(),
            seen: Vec::new(),
            sightings: Default::default(),
            removals: Default::default(),
            retrying: false,
            interim_now: false,
            clock: 0,
            bound: HashMap::new(),
            binding: HashMap::new(),
            ended_channels: Vec::new(),
            relaying: HashMap::new(),
            relays: Vec::new(),
            relayed: Vec::new(),
            relayed_disconnect: false,
        }
    }

    /// The name other connections' letters use (see [`Message`]).
    pub fn id(&self) -> ConnectionId {
        self.id
    }

    /// The largest frame to read from this client: smaller until one of
    /// its sessions has authenticated.
    pub fn max_message_size(&self, authenticated: bool) -> usize {
        let max = if authenticated {
            self.made_with.max_message_size
        } else {
            self.made_with.max_preauth_message_size
        };
        max as usize
    }

    fn trim_logged_off(&mut self) {
        const KEEP: usize = 16;
        while self.logged_off.len() > KEEP {
            let sid = self.logged_off.remove(0);
            self.sessions.remove(&sid);
        }
    }

    /// Sessions counted against the limit: all but logged-off ones.
    pub(crate) fn live_sessions(&self) -> usize {
        self.sessions.len() - self.logged_off.len()
    }

    /// True once any session finished authenticating, here or as a
    /// channel of another connection's.
    pub fn has_valid_session(&self) -> bool {
        !self.bound.is_empty() || self.sessions.values().any(|s| s.is_valid())
    }

    /// Who session `id` acts as on disk, once it is authenticated.
    pub fn session_identity(&self, id: u64) -> Option<&Identity> {
        self.sessions
            .get(&id)
            .filter(|s| s.is_valid())
            .map(|s| &s.who)
    }

    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }

    /// Handles one received message (one transport frame: an SMB2 message
    /// or a compound of several, or the SMB1 NEGOTIATE). Replies that wait
    /// for data I/O come later, from [`Connection::complete`]; the engine
    /// keeps `msg` until every intent it led to has completed.
    pub fn handle(&mut self, msg: &[u8], env: &mut dyn Env) -> Output {
        self.clock = env.now();
        self.end_sessions_of_removed_users();
        let mut out = if let Some(home) = self.relay_home(msg) {
            self.relay(msg, home)
        } else if smb1::is_smb1(msg) {
            self.handle_smb1(msg, env)
        } else if msg.starts_with(&copyless_proto::header::TRANSFORM_PROTOCOL_ID) {
            self.handle_encrypted(msg, env)
        } else {
            self.handle_plain(msg, env)
        };
        self.collect(&mut out, env);
        out
    }

    /// As [`Connection::handle`], for an engine that may change the frame:
    /// a sealed one is decrypted where it lies, so that what its requests
    /// carry (a WRITE's payload) is used from the engine's buffer, never
    /// copied. The engine keeps the frame, decrypted, until every intent
    /// it led to has completed. The same as [`Connection::unseal`] then
    /// [`Connection::handle_unsealed`].
    pub fn handle_in_place(&mut self, msg: &mut [u8], env: &mut dyn Env) -> Output {
        let how = self.unseal(msg);
        self.handle_unsealed(msg, how, env)
    }

    /// Decrypts the frame `msg` where it lies if it is sealed, so that
    /// [`Connection::unsealed_may_block`] can judge it by what it holds
    /// and [`Connection::handle_unsealed`] handle it, with nothing opened
    /// twice. A frame not sealed, or sealed for a session another
    /// connection holds (relayed as it came), is left as it is.
    pub fn unseal(&self, msg: &mut [u8]) -> Unsealed {
        if !msg.starts_with(&copyless_proto::header::TRANSFORM_PROTOCOL_ID)
            || self.relay_home(msg).is_some()
        {
            return Unsealed(Opening::AsItCame);
        }
        let Ok(sealed) = Sealed::parse(msg) else {
            return Unsealed(Opening::Refused);
        };
        let sid = sealed.header.session_id;
        let ciphers = self.sessions.get(&sid).and_then(|s| s.ciphers.as_ref());
        match ciphers {
            Some(ciphers) if ciphers.open_in_place(msg) => Unsealed(Opening::Opened { sid }),
            // What does not decrypt ends the connection (MS-SMB2
            // 3.3.5.2.1.1).
            _ => Unsealed(Opening::Refused),
        }
    }

    /// [`Connection::may_block`] of a frame [`Connection::unseal`] saw.
    pub fn unsealed_may_block(&self, msg: &[u8], how: Unsealed) -> bool {
        match how.0 {
            Opening::AsItCame => self.may_block(msg),
            Opening::Opened { .. } => self.plain_may_block(&msg[TRANSFORM_HEADER_LEN..]),
            Opening::Refused => false,
        }
    }

    /// Handles the frame `msg` as [`Connection::unseal`] left it; a
    /// decrypted one's reply is encrypted with the same session's key.
    pub fn handle_unsealed(&mut self, msg: &mut [u8], how: Unsealed, env: &mut dyn Env) -> Output {
        let sid = match how.0 {
            Opening::AsItCame => return self.handle(msg, env),
            Opening::Opened { sid } => Some(sid),
            Opening::Refused => None,
        };
        self.clock = env.now();
        self.end_sessions_of_removed_users();
        let mut out = match sid.filter(|sid| self.sessions.contains_key(sid)) {
            Some(sid) => self.handle_opened(sid, msg, Some(TRANSFORM_HEADER_LEN), env),
            None => Output::close(Vec::new()),
        };
        self.collect(&mut out, env);
        out
    }

    /// Moves what handling left for the engine into the output.
    pub(crate) fn collect(&mut self, out: &mut Output, env: &mut dyn Env) {
        self.run_relays(env, out);
        self.relayed_frames(out);
        self.run_retries(env, out);
        if std::mem::take(&mut self.interim_now) {
            self.send_interim_responses(env, out);
        }
        self.send_notices(env, out);
        self.take_changes();
        out.calls.append(&mut self.sightings.calls);
        out.calls.append(&mut self.removals.calls);
        self.send_answers(env, out);
        out.cancel.append(&mut self.cancelled);
        out.messages.append(&mut self.outbox);
        out.events.append(&mut self.events);
    }

    /// Does what another connection's letter asks.
    pub fn receive(&mut self, letter: Letter, env: &mut dyn Env) -> Output {
        self.take_letter(letter.0);
        let mut out = Output::default();
        self.collect(&mut out, env);
        out
    }

    /// Sends a letter to connection `to`. One for this connection is
    /// done at once, as receiving it would do it.
    pub(crate) fn post(&mut self, to: ConnectionId, kind: Kind) {
        if to == self.id() {
            self.take_letter(kind);
        } else {
            self.outbox.push(Message {
                to,
                letter: Letter(kind),
            });
        }
    }

    fn take_letter(&mut self, kind: Kind) {
        match kind {
            Kind::EndSession { session_id } => {
                if self.sessions.get(&session_id).is_some_and(|s| s.is_valid()) {
                    self.remove_session(session_id, true, RemoveBy::Call);
                }
            }
            Kind::LocksReleased { async_id } => self.retry_lock(async_id),
            Kind::OplockBreak { open, to } => self.notices.push(Notice::Oplock { open, to }),
            Kind::LeaseBreak(b) => self.notices.push(Notice::Lease(b)),
            Kind::BreakResolved { token } => self.retries.push(token),
            Kind::Changed(seen) => self.sight(seen),
            Kind::CloseOpen { open } => self.close_open_here(open, RemoveBy::Call),
            Kind::ChangesLost => self.changes_lost(),
            Kind::Relay {
                from,
                frame,
                sealed,
                grants,
            } => self.relays.push(Relay {
                from,
                frame,
                sealed,
                grants,
            }),
            Kind::Relayed {
                from,
                frame,
                granted,
                done,
                disconnect,
            } => self.take_relayed(from, frame, granted, done, disconnect),
            Kind::ChannelAdded {
                session_id,
                channel,
                key,
            } => match self.sessions.get_mut(&session_id) {
                Some(s) if s.is_valid() => {
                    s.channels.insert(channel, key.0);
                }
                // It ended before the channel's letter came.
                _ => self.post(channel, Kind::SessionEnded { session_id }),
            },
            Kind::ChannelGone { channel } => self.channel_gone(channel),
            Kind::SessionEnded { session_id } => self.session_ended(session_id),
        }
    }

    /// Whether handling `msg` may wait for a disk (or another slow
    /// filesystem): false only for plain frames whose every request
    /// reaches file data through intents (READ, WRITE, FLUSH), the
    /// filesystem through calls or not at all (a SET_INFO that changes
    /// only what the server keeps: see `sets_in_place`; a LOCK; a break
    /// acknowledgement; a CHANGE_NOTIFY; a CLOSE: `closes_in_place`), or
    /// only where the kernel answers from memory (an open of what the
    /// kernel's cache finds, the stat of an open file: `opens_in_place`
    /// and handlers/look.rs `looks_in_place`), so that an engine may run
    /// those on the thread that serves sockets, with an [`Env`] that may
    /// not wait (held requests they let go run again there only as their
    /// frames would, see `run_retries`). A sealed frame is judged by what
    /// it holds once opened ([`Connection::unseal`] and
    /// [`Connection::unsealed_may_block`]); as it came, it may block (a
    /// bound channel's, relayed to its home, or one not yet opened). An SMB1
    /// frame, the NEGOTIATE that begins a connection or anything refused,
    /// is memory alone.
    pub fn may_block(&self, msg: &[u8]) -> bool {
        if msg.starts_with(&copyless_proto::header::TRANSFORM_PROTOCOL_ID) {
            return true;
        }
        !smb1::is_smb1(msg) && self.plain_may_block(msg)
    }

    /// [`Connection::may_block`] of the plain SMB2 frame `msg`.
    fn plain_may_block(&self, msg: &[u8]) -> bool {
        let chain = copyless_proto::compound::messages(msg);
        !chain.enumerate().all(|(i, m)| {
            m.is_ok_and(|m| match m.header.command {
                cmd::READ
                | cmd::WRITE
                | cmd::FLUSH
                | cmd::ECHO
                | cmd::CANCEL
                | cmd::NEGOTIATE
                | cmd::SESSION_SETUP => true,
                cmd::CLOSE if m.header.is_related() => self.closes_made_in_place(msg, i, &m),
                cmd::CLOSE => self.closes_in_place(&m),
                // The second asks the filesystem, the first only memory.
                cmd::CREATE => self.opens_by_call(&m) || self.opens_in_place(&m),
                // What is not in memory is its call.
                cmd::QUERY_INFO => true,
                cmd::SET_INFO => self.sets_in_place(msg, i, &m),
                // Byte-range locks are the server's tables; a lock that
                // waits, and those it wakes, wait in memory.
                cmd::LOCK => true,
                // What a listing needs of the filesystem is its call.
                cmd::QUERY_DIRECTORY => true,
                // The server's tables; held requests it lets go run
                // again as their frames would (`run_retries`).
                cmd::OPLOCK_BREAK => true,
                cmd::TREE_DISCONNECT | cmd::LOGOFF => self.ends_nothing_open(&m),
                // What a watch gathers is memory; the engine's watch of
                // the folder is set up by a call.
                cmd::CHANGE_NOTIFY => true,
                cmd::IOCTL => messages::IoctlRequest::parse(m.bytes)
                    .is_ok_and(|io| crate::handlers::ioctl::in_place(io.ctl_code)),
                _ => false,
            })
        })
    }

    /// Whether the CLOSE `m` only gives its open back: the server's tables
    /// change and the descriptor is closed, which on a local filesystem
    /// never waits for the disk; a file or stream it removes goes as a
    /// call, and so do the attributes asked back (POSTQUERY_ATTRIB) where
    /// they are not in memory (handlers/file.rs); a watch it ends is let
    /// go of by the engine's watcher on its own thread. (What watchers of
    /// a tree may see of its changes is looked at by a call:
    /// notify_sight.rs; held requests it lets go, see `run_retries`.)
    /// An open not found is not looked at further; one named by a
    /// related request is judged by [`Connection::closes_made_in_place`].
    fn closes_in_place(&self, m: &copyless_proto::compound::Message<'_>) -> bool {
        messages::CloseRequest::parse(m.bytes).is_ok_and(|c| {
            self.file_open(m.header.session_id, c.file_id.volatile)
                .is_some()
        })
    }

    /// Whether the CLOSE `m`, request `index` of the compound `frame`
    /// and related to those before it, closes what the compound's first
    /// request, a CREATE, opened (Explorer's and Finder's CREATE, QUERY,
    /// CLOSE) as [`Connection::closes_in_place`] would: that open is not
    /// there yet to be looked at, so this holds only where the chain is
    /// the CREATE's alone.
    fn closes_made_in_place(
        &self,
        frame: &[u8],
        index: usize,
        m: &copyless_proto::compound::Message<'_>,
    ) -> bool {
        messages::CloseRequest::parse(m.bytes).is_ok() && chain_create(frame, index).is_some()
    }

    /// Whether the TREE_DISCONNECT or LOGOFF `m` ends a tree or session
    /// through which nothing is open (as clients mostly end them, having
    /// closed what they opened): the server's tables alone change. One
    /// that closes opens may remove files before it answers; a related
    /// one's ids are not looked into.
    fn ends_nothing_open(&self, m: &copyless_proto::compound::Message<'_>) -> bool {
        let h = &m.header;
        if h.is_related() {
            return false;
        }
        let Some(session) = self.sessions.get(&h.session_id) else {
            // Answered USER_SESSION_DELETED.
            return true;
        };
        let tree = (h.command == cmd::TREE_DISCONNECT).then_some(h.tree_id);
        !session
            .opens
            .values()
            .any(|o| tree.is_none_or(|t| o.tree_id == t))
    }

    /// Whether the CREATE `m` only opens an object that exists, on a
    /// path the share's VFS finds without waiting for a disk
    /// ([`copyless_vfs::Vfs::found_without_waiting`]): the lookup is then
    /// the kernel's cache, and the stat and attributes of the opened
    /// object are in memory. Timed on this project's machine, those calls
    /// take 6 us where handing them to another thread, or to the kernel's
    /// own workers as io_uring operations, takes over 20 (`cargo run
    /// --release -p copyless-engine --example fs_hop`). Whatever may
    /// create, truncate, reclaim a durable open, close an application
    /// instance's opens, open a stream or read a stored descriptor is not
    /// done in place. A parked durable open found in the way is let go
    /// of as a CLOSE in place would (removed on the spot only if it was
    /// to be deleted, which a reconnecting client rarely leaves).
    fn opens_in_place(&self, m: &copyless_proto::compound::Message<'_>) -> bool {
        use copyless_proto::create_context as cc;
        // Held requests let go run first (`run_retries`).
        if m.header.is_related() || !self.retries.is_empty() {
            return false;
        }
        let Ok(cr) = messages::CreateRequest::parse(m.bytes) else {
            return false;
        };
        if cr.create_disposition != crate::handlers::create::OPEN {
            return false;
        }
        let Ok(contexts) = cc::parse_chain(cr.contexts) else {
            return false;
        };
        let memory_only = crate::handlers::create::MEMORY_ONLY_CONTEXTS;
        if !contexts.iter().all(|c| memory_only.contains(&c.name)) {
            return false;
        }
        let tree = self.tree_of(&m.header);
        let Some(TreeKind::Disk { share, .. }) = tree.map(|t| &t.kind) else {
            return false;
        };
        let Ok(name) = crate::names::path::from_smb_with_stream(cr.name) else {
            return false;
        };
        name.stream.is_none()
            && !name.path.contains(crate::handlers::create::GMT_MARK)
            && !share.vfs.descriptors_stored()
            && share.vfs.found_without_waiting(&name.path)
    }

    /// Whether the CREATE `m` leaves its open as a call and goes on from
    /// its result with nothing but memory
    /// ([`crate::handlers::create::opens_by_call`]).
    fn opens_by_call(&self, m: &copyless_proto::compound::Message<'_>) -> bool {
        // Held requests let go run first (`run_retries`).
        if m.header.is_related() || !self.retries.is_empty() {
            return false;
        }
        let Ok(cr) = messages::CreateRequest::parse(m.bytes) else {
            return false;
        };
        let Ok(contexts) = copyless_proto::create_context::parse_chain(cr.contexts) else {
            return false;
        };
        let tree = self.tree_of(&m.header);
        let Some((TreeKind::Disk { .. }, read_only)) = tree.map(|t| (&t.kind, t.read_only)) else {
            return false;
        };
        let Ok(name) = crate::names::path::from_smb_with_stream(cr.name) else {
            return false;
        };
        crate::handlers::create::opens_by_call(&cr, &contexts, &name.path, &name.stream, read_only)
    }

    /// Whether the SET_INFO `m`, request `index` of the compound `frame`,
    /// changes only what the server keeps in memory, or what it changes
    /// on the filesystem is its call (handlers/change.rs, a descriptor's
    /// handlers/info.rs): everything but a rename that is not made by a
    /// call ([`crate::handlers::info::renames_by_call`]). A related
    /// rename acts on what
    /// the compound's first request, a CREATE, opens (Finder renames with
    /// CREATE, SET_INFO, CLOSE): not there yet, it is judged by that
    /// request and its share.
    fn sets_in_place(
        &self,
        frame: &[u8],
        index: usize,
        m: &copyless_proto::compound::Message<'_>,
    ) -> bool {
        use crate::handlers::info::{rename_target, renames_by_call, replaced_without_waiting};
        use copyless_fscc::class;
        let Ok(set) = messages::SetInfoRequest::parse(m.bytes) else {
            return false;
        };
        match (set.info_type, set.class) {
            (messages::INFO_FILE, class::FILE_RENAME_INFORMATION) => {
                let Ok(r) = copyless_fscc::decode_rename(set.buffer) else {
                    return false;
                };
                let Ok(target) = rename_target(&r.file_name) else {
                    return false;
                };
                let replace = r.replace_if_exists;
                if !m.header.is_related() {
                    return self
                        .file_open(m.header.session_id, set.file_id.volatile)
                        .is_some_and(|f| renames_by_call(f, &target, replace));
                }
                let Some((first, _, name)) = chain_create(frame, index) else {
                    return false;
                };
                // Related requests act in the first one's session and tree.
                let tree = self.tree_of(&first.header);
                let Some(TreeKind::Disk { share, .. }) = tree.map(|t| &t.kind) else {
                    return false;
                };
                set.file_id == FileId::RELATED
                    && name.stream.is_none()
                    && replaced_without_waiting(share.vfs.as_ref(), &target, replace)
            }
            (
                messages::INFO_FILE,
                class::FILE_POSITION_INFORMATION | class::FILE_MODE_INFORMATION,
            ) => true,
            _ => true,
        }
    }

    /// The tree a request's header names, in the session it names.
    fn tree_of(&self, header: &copyless_proto::header::Header) -> Option<&Tree> {
        self.sessions
            .get(&header.session_id)?
            .trees
            .get(&header.tree_id)
    }

    /// The file or folder open `volatile` of session `session_id`.
    fn file_open(&self, session_id: u64, volatile: u64) -> Option<&FileOpen> {
        match &self.sessions.get(&session_id)?.opens.get(&volatile)?.kind {
            OpenKind::File(f) => Some(f),
            _ => None,
        }
    }

    /// How long the engine may wait, when no message arrives, before
    /// calling [`Connection::handle_timeout`]; None when nothing is due.
    pub fn timeout(&self) -> Option<Duration> {
        // Held requests to run again, left by a call that could not wait.
        if !self.retries.is_empty() {
            return Some(Duration::ZERO);
        }
        let sessions = self.has_valid_session().then_some(SESSION_CHECK_INTERVAL);
        match (sessions, self.interim_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether [`Connection::handle_timeout`] may reach the filesystem:
    /// a held request to run again, a relayed request to run. An engine
    /// that serves sockets on one thread runs the timeout elsewhere then,
    /// as it does frames [`Connection::may_block`] names; otherwise the
    /// tick sends interim responses, checks sessions, ends breaks nobody
    /// answered (the requests they held run again on the next tick, see
    /// [`Env::may_wait`]) and closes what is due (disconnected durable
    /// opens whose time is up, the opens of a user removed from the
    /// store), whose files' removals are calls (removals.rs).
    pub fn timeout_may_block(&self) -> bool {
        !self.retries.is_empty() || !self.relays.is_empty()
    }

    /// Work that is due without a message: interim responses for requests
    /// that have waited long, and the end of sessions of users removed
    /// from the user store.
    pub fn handle_timeout(&mut self, env: &mut dyn Env) -> Output {
        self.clock = env.now();
        self.end_sessions_of_removed_users();
        self.expire_holds(self.clock);
        self.expire_parked(self.clock, RemoveBy::Call);
        let mut out = Output::default();
        self.send_interim_responses(env, &mut out);
        self.collect(&mut out, env);
        out
    }

    /// A user removed from the store (`copyless user del`) loses every
    /// session at once, its opens closed, as if it had logged off; only a
    /// change of the store's generation costs a lookup per session.
    fn end_sessions_of_removed_users(&mut self) {
        let credentials = self.server.credentials.clone();
        let generation = credentials.generation();
        if generation == self.credentials_generation {
            return;
        }
        self.credentials_generation = generation;
        let removed: Vec<u64> = self
            .sessions
            .values()
            .filter(|s| s.is_valid() && !s.anonymous && !s.guest)
            .filter(|s| credentials.nt_hash(&s.user).is_none())
            .map(|s| s.id)
            .collect();
        for sid in removed {
            self.remove_session(sid, false, RemoveBy::Call);
        }
    }

    /// Decrypts a transform message, handles what it holds, and encrypts
    /// the reply with the same session's key. Anything that does not
    /// decrypt ends the connection (MS-SMB2 3.3.5.2.1.1).
    fn handle_encrypted(&mut self, msg: &[u8], env: &mut dyn Env) -> Output {
        // The bytes are not ours to change: decrypted in a copy, which no
        // request may name ranges of.
        let mut copy = msg.to_vec();
        match self.unseal(&mut copy).0 {
            Opening::Opened { sid } => self.handle_opened(sid, &copy, None, env),
            _ => Output::close(Vec::new()),
        }
    }

    /// Handles what the frame `msg`, opened with session `sid`'s key,
    /// holds; `frame_at` as [`Connection::drive`]'s.
    fn handle_opened(
        &mut self,
        sid: u64,
        msg: &[u8],
        frame_at: Option<usize>,
        env: &mut dyn Env,
    ) -> Output {
        let mut out = Output::default();
        let plain = &msg[TRANSFORM_HEADER_LEN..];
        self.drive(Chain::new(Some(sid)), plain, frame_at, env, &mut out);
        out
    }

    fn handle_plain(&mut self, msg: &[u8], env: &mut dyn Env) -> Output {
        let mut out = Output::default();
        self.drive(Chain::new(None), msg, Some(0), env, &mut out);
        out
    }

    /// Answers the messages of `msgs` in order into `chain`, until the
    /// compound ends or a request waits for an intent. `frame_at` is where
    /// `msgs` starts in the frame the engine holds, None when the bytes
    /// are the core's own.
    pub(crate) fn drive(
        &mut self,
        mut chain: Chain,
        msgs: &[u8],
        frame_at: Option<usize>,
        env: &mut dyn Env,
        out: &mut Output,
    ) {
        for m in copyless_proto::compound::messages(msgs) {
            // A message that cannot be framed, anywhere in the compound,
            // ends the connection; the replies before it still go out,
            // finished (padded and signed) below.
            let Ok(m) = m else {
                chain.disconnect = true;
                break;
            };
            let hdr = m.header;
            if self.dialect == 0 && hdr.command != cmd::NEGOTIATE {
                // The first request on a connection must negotiate.
                chain.disconnect = true;
                break;
            }
            chain.compound.more_follow = !m.last;
            chain.compound.room =
                MAX_REPLY_FRAME.saturating_sub(chain.out.len().next_multiple_of(8));
            let first = chain.handled == 0;
            chain.handled += 1;
            let at = frame_at.map(|f| f + m.offset);
            match self.handle_one(m.bytes, hdr, first, at, &mut chain, env) {
                Step::Silent => out.requests.push(self.request_trace(&hdr, None)),
                Step::Drop(reply) => {
                    out.requests
                        .push(self.request_trace(&hdr, Some((&[], &reply))));
                    chain.disconnect = true;
                    break;
                }
                Step::Reply(bytes, reply) => {
                    out.requests
                        .push(self.request_trace(&hdr, Some((&bytes, &reply))));
                    if bytes.len() > chain.compound.room {
                        // Only a flood of small replies gets here (each
                        // large one was refused before it ran): the frame
                        // cannot say its length, so the connection ends,
                        // as Samba ends it.
                        chain.out.clear();
                        chain.prev = None;
                        chain.disconnect = true;
                        break;
                    }
                    let p = self.link(&mut chain);
                    chain.out.extend_from_slice(&bytes);
                    chain.prev = Some((p, reply.signer()));
                    if reply.disconnect {
                        chain.disconnect = true;
                        break;
                    }
                }
                Step::Pend(begun, async_id, what) => {
                    let via = chain.via.as_ref().map(|v| v.to);
                    let interim = self.park(begun, async_id, what, chain.sealed, via);
                    let p = self.link(&mut chain);
                    chain.out.extend_from_slice(&interim);
                    chain.prev = Some((p, None));
                }
                Step::Hold(begun, hold) => {
                    let rest = msgs[m.offset + m.bytes.len()..].to_vec();
                    self.hold(chain, begun, m.bytes, rest, hold, env.now());
                    return;
                }
                Step::Wait(begun, wait) => {
                    let rest = msgs[m.offset + m.bytes.len()..].to_vec();
                    self.suspend(chain, begun, wait, rest, env.now(), out);
                    return;
                }
            }
        }
        self.finish_chain(chain, env, out);
    }

    /// Pads the previous reply of the chain, points it at the next one
    /// and signs it; returns where the next reply starts.
    pub(crate) fn link(&self, chain: &mut Chain) -> usize {
        if let Some((p, signer)) = chain.prev.take() {
            let padded = (chain.out.len() - p).next_multiple_of(8);
            chain.out.resize(p + padded, 0);
            let off = (chain.out.len() - p) as u32;
            chain.out[p + 20..p + 24].copy_from_slice(&off.to_le_bytes());
            let via = chain.via.as_ref().map(|v| v.to);
            self.sign_reply(&mut chain.out[p..], signer, via);
        }
        chain.out.len()
    }

    /// The compound is answered: its last reply is finished and the frame
    /// (sealed when the request was) goes out.
    pub(crate) fn finish_chain(&mut self, mut chain: Chain, env: &mut dyn Env, out: &mut Output) {
        let via = chain.via.as_ref().map(|v| v.to);
        if let Some((p, signer)) = chain.prev.take() {
            if chain.handled > 1 {
                // Every reply of a compound is padded to 8 bytes, the last
                // one too, as Windows and Samba do (smb2.compound.
                // compound-padding checks a 3-byte READ comes back as 24).
                let padded = (chain.out.len() - p).next_multiple_of(8);
                chain.out.resize(p + padded, 0);
            }
            self.sign_reply(&mut chain.out[p..], signer, via);
        }
        self.trim_logged_off();
        let mut disconnect = chain.disconnect;
        let frame = match chain.sealed {
            _ if chain.out.is_empty() => None,
            None => Some(chain.out),
            Some(sid) => {
                let mut salt = [0u8; 8];
                env.fill_random(&mut salt);
                match self.sessions.get_mut(&sid).and_then(|s| s.ciphers.as_mut()) {
                    Some(c) => Some(c.seal(sid, &chain.out, salt)),
                    // The session logged off inside this very message.
                    None => {
                        disconnect = true;
                        None
                    }
                }
            }
        };
        match chain.via {
            // The replies are about to be sent: the credits they grant are
            // the client's from now on.
            None => {
                self.credits.release(chain.granted);
                out.disconnect |= disconnect;
                out.frames.extend(frame);
            }
            Some(via) => {
                let from = self.id();
                self.post(
                    via.to,
                    Kind::Relayed {
                        from,
                        frame: frame.unwrap_or_default(),
                        granted: chain.granted,
                        done: via.bytes,
                        disconnect,
                    },
                );
            }
        }
    }

    pub(crate) fn request_trace(
        &self,
        hdr: &Header,
        reply: Option<(&[u8], &Reply)>,
    ) -> RequestTrace {
        let status = reply
            .and_then(|(bytes, _)| bytes.get(8..12))
            .and_then(|b| b.try_into().ok())
            .map_or(0, u32::from_le_bytes);
        let session = reply.and_then(|(_, r)| Some((self.sessions.get(&r.session_id)?, r.tree_id)));
        let share = session
            .and_then(|(s, tree_id)| s.trees.get(&tree_id))
            .and_then(|t| match t.kind {
                TreeKind::Disk { index, .. } => Some(index),
                TreeKind::Ipc => None,
            });
        let user = session
            .filter(|(s, _)| s.is_valid())
            .map(|(s, _)| s.user.clone());
        RequestTrace {
            command: hdr.command,
            message_id: hdr.message_id,
            status,
            share,
            user,
        }
    }

    /// Closes every open of every session (the connection went away);
    /// returns the letters that wake what its locks held up elsewhere.
    pub fn shutdown(&mut self) -> Vec<Message> {
        if self.dialect != 0 {
            self.server.clients.leave(self.client_guid, self.id());
        }
        self.leave_channels();
        self.settle_waiting();
        self.settle_removals();
        let ids: Vec<u64> = self.sessions.keys().copied().collect();
        for id in ids {
            self.remove_session(id, true, RemoveBy::Here);
        }
        // Last: removing the sessions published the connection again.
        self.withdraw_status();
        self.answers.clear();
        std::mem::take(&mut self.outbox)
    }

    fn handle_smb1(&mut self, msg: &[u8], env: &mut dyn Env) -> Output {
        if self.dialect != 0 {
            return Output::close(Vec::new());
        }
        match smb1::parse_negotiate(msg) {
            Ok(smb1::Upgrade::Wildcard) => self.smb1_upgrade(true, env),
            // 2.0.2 alone, where the server requires more.
            Ok(smb1::Upgrade::Smb202)
                if self.server.config.min_dialect > copyless_proto::negotiate::DIALECT_202 =>
            {
                Output::close(Vec::new())
            }
            Ok(smb1::Upgrade::Smb202) => self.smb1_upgrade(false, env),
            _ => Output::close(Vec::new()),
        }
    }

    /// Handles one request of `chain`'s compound. A reply, when it has
    /// one now, is signed only once the chain places the next (signing
    /// needs the final NextCommand).
    fn handle_one(
        &mut self,
        msg: &[u8],
        hdr: Header,
        first: bool,
        frame_at: Option<usize>,
        chain: &mut Chain,
        env: &mut dyn Env,
    ) -> Step {
        let encrypted = chain.sealed.is_some();
        let via = chain.via.as_ref().map(|v| v.to);
        let relayed_grant = chain
            .via
            .as_ref()
            .map(|v| v.grants.get(chain.handled - 1).copied().unwrap_or(0));
        let compound = &mut chain.compound;
        let related = hdr.flags & FLAG_RELATED_OPERATIONS != 0;
        let (session_id, tree_id) = if related && !first {
            (compound.session_id, compound.tree_id)
        } else {
            (hdr.session_id, hdr.tree_id)
        };
        if !related {
            compound.file_id = None;
        }
        // A related request after this one acts on the file this one
        // names (MS-SMB2 3.3.5.2.7.2), a FLUSH's as much as a CREATE's; a
        // CREATE names none, and gives the one it opens, if it opens one.
        match messages::named_file_id(hdr.command, msg) {
            Some(id) if id != FileId::RELATED => compound.file_id = Some(id),
            _ if hdr.command == cmd::CREATE => compound.file_id = None,
            _ => {}
        }
        compound.related = related && !first;
        let mut reply = Reply {
            session_id,
            tree_id,
            header_session_id: hdr.session_id,
            header_tree_id: hdr.tree_id,
            sign: false,
            preauth_update: None,
            preauth_connection: false,
            disconnect: false,
            suppress: false,
            sign_sid: None,
            sign_key: None,
            echo_signature: false,
            wait: None,
            pend: None,
            hold: None,
            audit: None,
        };
        let req = Req {
            msg,
            hdr,
            session_id,
            tree_id,
            encrypted,
            frame_at,
            via,
        };
        let mut w = Writer::with_capacity(HEADER_LEN + 128);
        w.zeros(HEADER_LEN);

        let mut granted = 0u16;
        let result = if hdr.command == cmd::CANCEL {
            // CANCEL takes no credit and gets no reply of its own.
            self.cancel(&hdr, via);
            reply.suppress = true;
            Ok(status::SUCCESS)
        } else {
            if let Some(g) = relayed_grant {
                // The channel took the credits.
                granted = g;
            } else {
                let charge = self.credit_charge(&hdr);
                if !self.credits.consume(hdr.message_id, charge) {
                    return Step::Drop(reply);
                }
                granted = self.credits.grant(hdr.credits.max(1));
            }
            if related && first {
                // The first request of a compound cannot be related.
                Err(status::INVALID_PARAMETER)
            } else if self.reply_bound(&hdr) > compound.room {
                // Its reply could not join the others in one frame.
                Err(status::INSUFFICIENT_RESOURCES)
            } else {
                self.run(&req, &mut reply, compound, &mut w, env)
            }
        };
        if matches!(
            hdr.command,
            cmd::NEGOTIATE
                | cmd::SESSION_SETUP
                | cmd::LOGOFF
                | cmd::TREE_CONNECT
                | cmd::TREE_DISCONNECT
        ) {
            self.publish_status();
        }
        chain.granted += u64::from(granted);
        if reply.suppress {
            return Step::Silent;
        }
        let mut begun = Begun {
            hdr,
            reply,
            granted,
        };
        if result.is_ok() {
            if let Some(wait) = begun.reply.wait.take() {
                return Step::Wait(begun, wait);
            }
            if let Some((async_id, what)) = begun.reply.pend.take() {
                return Step::Pend(begun, async_id, what);
            }
            if let Some(hold) = begun.reply.hold.take() {
                return Step::Hold(begun, hold);
            }
        }
        let bytes = self.finish_one(&mut begun, result, w, chain);
        if related && first {
            // A related first request has no session or tree for those
            // after it to inherit: the related ones fail too (MS-SMB2
            // 3.3.5.2.7.2, smb2.compound.related9).
            chain.compound.session_id = 0;
            chain.compound.tree_id = 0;
        }
        Step::Reply(bytes, begun.reply)
    }

    /// Builds a request's reply around the body in `w` (after a header's
    /// room), or an error reply; records what the compound's next request
    /// inherits.
    /// The session whose key signs an unsealed reply: its own session's
    /// when that signs (required, or the request came signed, or the
    /// command asks), else that of the compound's previous reply.
    pub(crate) fn signer(&self, hdr: &Header, reply: &Reply, previous: Option<u64>) -> Option<u64> {
        let own = self
            .sessions
            .get(&reply.session_id)
            .filter(|s| s.signing.is_some())
            .map(|s| {
                (
                    s.signing_required || hdr.flags & FLAG_SIGNED != 0 || reply.sign,
                    s.id,
                )
            });
        match own {
            Some((true, sid)) => Some(sid),
            Some((false, _)) => None,
            None => previous,
        }
    }

    pub(crate) fn finish_one(
        &mut self,
        begun: &mut Begun,
        result: Result<NtStatus, NtStatus>,
        mut w: Writer,
        chain: &mut Chain,
    ) -> Vec<u8> {
        let Begun {
            hdr,
            reply,
            granted,
        } = begun;
        let compound = &mut chain.compound;
        let status = match result {
            Ok(s) => s,
            Err(s) => {
                w.buf.truncate(HEADER_LEN);
                messages::write_error_response(&mut w, &[]);
                s
            }
        };
        if let Some(audited) = reply.audit.take() {
            self.audit_reply(reply.session_id, reply.tree_id, audited, status);
        }
        compound.last_status = status;
        compound.session_id = reply.session_id;
        compound.tree_id = reply.tree_id;

        let mut flags = FLAG_SERVER_TO_REDIR;
        if hdr.flags & FLAG_RELATED_OPERATIONS != 0 {
            flags |= FLAG_RELATED_OPERATIONS;
        }
        if hdr.flags & FLAG_ASYNC_COMMAND != 0 {
            flags |= FLAG_ASYNC_COMMAND;
        }
        if self.dialect == copyless_proto::negotiate::DIALECT_311 {
            flags |= hdr.flags & copyless_proto::header::FLAG_PRIORITY_MASK;
        }
        let mut signature = [0; 16];
        if chain.sealed.is_none() {
            reply.sign_sid = self.signer(hdr, reply, compound.sign_sid);
            if reply.sign_sid.is_some() || reply.sign_key.is_some() {
                flags |= FLAG_SIGNED;
            } else if reply.echo_signature {
                flags |= FLAG_SIGNED;
                signature = hdr.signature;
            }
        }
        compound.sign_sid = reply.sign_sid;
        let rh = Header {
            credit_charge: hdr.credit_charge,
            status,
            command: hdr.command,
            credits: *granted,
            flags,
            next_command: 0,
            message_id: hdr.message_id,
            async_id: hdr.async_id,
            process_id: hdr.process_id,
            tree_id: reply.header_tree_id,
            session_id: reply.header_session_id,
            signature,
        };
        let mut head = Vec::with_capacity(HEADER_LEN);
        rh.write(&mut head);
        w.buf[..HEADER_LEN].copy_from_slice(&head);
        let bytes = w.into_vec();
        if reply.preauth_connection {
            self.preauth.update(&bytes);
        }
        if let Some(sid) = reply.preauth_update {
            if let Some(s) = self.sessions.get_mut(&sid) {
                s.preauth.update(&bytes);
            } else if let Some(b) = self.binding.get_mut(&sid) {
                // A bind's replies are signed with the session's key, and
                // the client hashes them as they come.
                let mut signed = bytes.clone();
                if let Some(key) = reply.sign_key.as_ref().filter(|_| flags & FLAG_SIGNED != 0) {
                    key.sign(&mut signed);
                }
                b.preauth.update(&signed);
            }
        }
        bytes
    }

    pub(crate) fn credit_charge(&self, hdr: &Header) -> u64 {
        if self.supports_multi_credit() {
            u64::from(hdr.credit_charge.max(1))
        } else {
            1
        }
    }

    pub(crate) fn supports_multi_credit(&self) -> bool {
        self.server_capabilities & copyless_proto::negotiate::CAP_LARGE_MTU != 0
    }

    /// The largest reply a request can have: handlers refuse a request
    /// whose output length needs more credits than it paid for (MS-SMB2
    /// 3.3.5.2.5), each credit paying for 64 KiB, or that is larger than
    /// the negotiated maximums.
    fn reply_bound(&self, hdr: &Header) -> usize {
        let paid = self.credit_charge(hdr) as usize * CREDIT_PAYLOAD;
        REPLY_OVERHEAD + paid.min(self.max_io as usize)
    }

    /// Fails a request whose payload or expected response is larger than
    /// its credit charge pays for (MS-SMB2 3.3.5.2.5).
    pub(crate) fn check_charge(&self, req: &Req<'_>, len: u32) -> Result<(), NtStatus> {
        if self.supports_multi_credit() && req.hdr.credit_charge.max(1) < required_charge(len) {
            return Err(status::INVALID_PARAMETER);
        }
        Ok(())
    }

    /// Checks session, signature and tree, then runs the command.
    pub(crate) fn run(
        &mut self,
        req: &Req<'_>,
        reply: &mut Reply,
        compound: &mut Compound,
        w: &mut Writer,
        env: &mut dyn Env,
    ) -> Result<NtStatus, NtStatus> {
        let c = req.hdr.command;
        match c {
            cmd::NEGOTIATE => return self.negotiate(req, reply, w, env),
            cmd::SESSION_SETUP => {
                let kind = self.logon_kind(req);
                let result = self.verify_if_established(req).and_then(|()| {
                    reply.sign_key = self.verify_foreign(req)?;
                    self.session_setup(req, reply, w, env)
                });
                self.logon_ended(kind, reply.session_id, &result);
                return result;
            }
            cmd::ECHO if req.session_id == 0 => {
                messages::parse_empty(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
                messages::write_empty_response(w);
                return Ok(status::SUCCESS);
            }
            _ => {}
        }
        if !self.sessions.contains_key(&req.session_id) {
            if compound.related {
                return Err(status::INVALID_PARAMETER);
            }
            let signed = req.hdr.flags & FLAG_SIGNED != 0 && !req.encrypted;
            reply.sign_key = self
                .ended_channels
                .iter()
                .find(|(sid, key)| *sid == req.session_id && signed && key.verify(req.msg))
                .map(|(_, key)| key.clone());
            // A session nobody holds here, whose key this connection does
            // not have: the reply echoes the request's signature, as
            // Samba's does, so that a client that requires signed
            // replies still hears STATUS_USER_SESSION_DELETED
            // (smbtorture's smb2.session-id and smb2.tcon).
            reply.echo_signature = signed && reply.sign_key.is_none();
            return Err(status::USER_SESSION_DELETED);
        }
        self.verify(req)?;
        let session = &self.sessions[&req.session_id];
        if !session.is_valid() {
            return Err(status::USER_SESSION_DELETED);
        }
        if session.encrypt_data && !req.encrypted {
            return Err(status::ACCESS_DENIED);
        }
        if session.is_expired(env.now()) && !crate::conn::session::runs_when_expired(req) {
            return Err(status::NETWORK_SESSION_EXPIRED);
        }
        match c {
            cmd::LOGOFF => return self.logoff(req, w),
            cmd::ECHO => {
                messages::parse_empty(req.msg).map_err(|_| status::INVALID_PARAMETER)?;
                messages::write_empty_response(w);
                return Ok(status::SUCCESS);
            }
            cmd::TREE_CONNECT => return self.tree_connect(req, reply, w),
            _ => {}
        }
        match session.trees.get(&req.tree_id) {
            None => return Err(status::NETWORK_NAME_DELETED),
            Some(tree) if tree.generation != self.server.shares.generation() => {
                self.recheck_tree(req.session_id, req.tree_id)?;
            }
            Some(_) => {}
        }
        match c {
            cmd::TREE_DISCONNECT => self.tree_disconnect(req, w),
            cmd::CREATE => self.create(req, compound, reply, w, env, None),
            cmd::CLOSE => self.close(req, compound, reply, w, None),
            cmd::FLUSH => self.flush(req, compound, reply, w),
            cmd::READ => self.read(req, compound, reply, w),
            cmd::WRITE => self.write(req, compound, reply, w),
            cmd::QUERY_DIRECTORY => self.query_directory(req, compound, reply),
            cmd::QUERY_INFO => self.query_info(req, compound, reply, w, None),
            cmd::SET_INFO => self.set_info(req, compound, reply, w, None),
            cmd::IOCTL => self.ioctl(req, compound, reply, w, env),
            cmd::LOCK => self.lock(req, compound, reply, w),
            cmd::CHANGE_NOTIFY => self.change_notify(req, compound, reply, w),
            cmd::OPLOCK_BREAK => self.oplock_break(req, compound, w),
            _ => Err(status::INVALID_PARAMETER),
        }
    }

    /// SESSION_SETUP on an established session (re-authentication) is
    /// verified like any other request; during authentication there is no
    /// key yet.
    fn verify_if_established(&self, req: &Req<'_>) -> Result<(), NtStatus> {
        match self.sessions.get(&req.session_id) {
            Some(s) if s.is_valid() && s.signing.is_some() => self.verify(req),
            _ => Ok(()),
        }
    }

    /// A SESSION_SETUP signed for a session another connection holds (a
    /// bind, or a stray re-authentication) is checked with that session's
    /// key, so that its refusal can be signed with it: true when it was.
    /// Only a request proven to come from the key's holder gets a reply
    /// signed with it.
    fn verify_foreign(&self, req: &Req<'_>) -> Result<Option<Arc<SigningKey>>, NtStatus> {
        if req.session_id == 0
            || req.encrypted
            || req.hdr.flags & FLAG_SIGNED == 0
            || self.sessions.contains_key(&req.session_id)
        {
            return Ok(None);
        }
        match self.server.sessions.facts(req.session_id) {
            Some(facts) if facts.signing.verify(req.msg) => Ok(Some(facts.signing)),
            Some(_) => Err(status::ACCESS_DENIED),
            None => Ok(None),
        }
    }

    /// The algorithm that signs this connection's sessions: HMAC-SHA256
    /// before SMB 3, AES-CMAC for 3.0 and 3.0.2, the negotiated one for
    /// 3.1.1.
    pub(crate) fn effective_signing_algorithm(&self) -> SigningAlgorithm {
        match self.dialect {
            copyless_proto::negotiate::DIALECT_311 => self.signing_algorithm,
            d if d >= copyless_proto::negotiate::DIALECT_300 => SigningAlgorithm::AesCmac,
            _ => SigningAlgorithm::HmacSha256,
        }
    }

    fn verify(&self, req: &Req<'_>) -> Result<(), NtStatus> {
        let Some(session) = self.sessions.get(&req.session_id) else {
            return Ok(());
        };
        if req.via.is_some_and(|c| !session.channels.contains_key(&c)) {
            // Relayed by a connection that is no channel of the session.
            return Err(status::USER_SESSION_DELETED);
        }
        if req.encrypted {
            // The transform's authentication tag already proved the key.
            return Ok(());
        }
        let Some(key) = session.key_for(req.via) else {
            return Ok(());
        };
        let signed = req.hdr.flags & FLAG_SIGNED != 0;
        if !signed {
            return if session.signing_required {
                Err(status::ACCESS_DENIED)
            } else {
                Ok(())
            };
        }
        if key.verify(req.msg) {
            Ok(())
        } else {
            Err(status::ACCESS_DENIED)
        }
    }

    /// Signs a reply whose header is final, when its session asks for it;
    /// one relayed from channel `via` with that channel's key.
    fn sign_reply(&self, msg: &mut [u8], signer: Option<Signer>, via: Option<ConnectionId>) {
        let flags = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]);
        let Some(signer) = signer.filter(|_| flags & FLAG_SIGNED != 0) else {
            return;
        };
        let key = match &signer {
            Signer::Key(k) => Some(&**k),
            Signer::Session(sid) => self.sessions.get(sid).and_then(|s| s.key_for(via)),
        };
        if let Some(key) = key {
            key.sign(msg);
        } else {
            // The session went away (LOGOFF): nothing to sign with.
            let f = flags & !FLAG_SIGNED;
            msg[16..20].copy_from_slice(&f.to_le_bytes());
        }
    }

    /// Finds the open a request names; a related request may name the file
    /// of the previous request.
    pub(crate) fn file_id(&self, id: FileId, compound: &Compound) -> Result<FileId, NtStatus> {
        if id == FileId::RELATED && compound.related {
            return match compound.file_id {
                Some(f) => Ok(f),
                None if compound.last_status != status::SUCCESS => Err(compound.last_status),
                None => Err(status::FILE_CLOSED),
            };
        }
        Ok(id)
    }
}

/// Payload one credit pays for (MS-SMB2 3.1.5.2).
const CREDIT_PAYLOAD: usize = 65536;

/// Credits a payload or response of `len` bytes must be charged
/// (MS-SMB2 3.1.5.2).
fn required_charge(len: u32) -> u16 {
    (len.saturating_sub(1) / CREDIT_PAYLOAD as u32 + 1) as u16
}

impl Output {
    pub(crate) fn close(frames_so_far: Vec<u8>) -> Output {
        Output {
            frames: if frames_so_far.is_empty() {
                vec![]
            } else {
                vec![frames_so_far]
            },
            disconnect: true,
            ..Output::default()
        }
    }

    /// Adds what a later step produced. `aside` is not carried: only
    /// [`Connection::complete`] sets it, on an output that stands alone.
    pub fn append(&mut self, other: Output) {
        self.frames.extend(other.frames);
        self.intents.extend(other.intents);
        self.calls.extend(other.calls);
        self.cancel.extend(other.cancel);
        self.messages.extend(other.messages);
        self.disconnect |= other.disconnect;
        self.requests.extend(other.requests);
        self.events.extend(other.events);
    }
}

/// The compound `frame`'s first request when it is a CREATE related to
/// nothing before it and every request up to `index` is related to it
/// and names no other file: then those act on what it opens (Explorer's
/// and Finder's CREATE, QUERY_INFO, CLOSE). The request, parsed, and the
/// name it opens.
fn chain_create(
    frame: &[u8],
    index: usize,
) -> Option<(
    copyless_proto::compound::Message<'_>,
    messages::CreateRequest<'_>,
    crate::names::path::CreateName,
)> {
    let mut chain = copyless_proto::compound::messages(frame).take(index);
    let first = chain.next()?.ok()?;
    if first.header.command != cmd::CREATE || first.header.is_related() {
        return None;
    }
    let cr = messages::CreateRequest::parse(first.bytes).ok()?;
    let name = crate::names::path::from_smb_with_stream(cr.name).ok()?;
    chain
        .all(|m| {
            m.is_ok_and(|m| {
                m.header.is_related()
                    && messages::named_file_id(m.header.command, m.bytes)
                        .is_none_or(|id| id == FileId::RELATED)
            })
        })
        .then_some((first, cr, name))
}
