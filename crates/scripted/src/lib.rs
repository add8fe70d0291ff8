//! A scripted SMB client that drives the protocol core in memory: it
//! negotiates SMB 2.1 or 3.1.1, logs in with NTLMv2, signs every request
//! (and in 3.1.1 can encrypt), and hands back the replies of each frame,
//! checked. No sockets; deterministic.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use copyless_auth::{
    ClientIdentity, Credentials, Initiator, InitiatorRandom, InitiatorStep, UnixAccount,
};
use copyless_core::SessionCiphers;
use copyless_core::{
    Completion, Connection, Env, Event, Letter, Limits, Message, Output, Server, ServerConfig,
    Share, ShareAccess, Token,
};
use copyless_crypto::session_keys::signing_key;
use copyless_crypto::{CipherId, PreauthHash, SigningAlgorithm, SigningKey};
use copyless_proto::client::{
    self as wire, CreateParams, NegotiateOffer, NegotiateReply, SessionSetupReply,
};
use copyless_proto::command;
use copyless_proto::header::{Header, FLAG_ASYNC_COMMAND, FLAG_RELATED_OPERATIONS, FLAG_SIGNED};
use copyless_proto::messages::FileId;
use copyless_proto::negotiate::{self as neg, DIALECT_210, DIALECT_311};
use copyless_proto::transform::Sealed;
use copyless_proto::{status, Writer, HEADER_LEN};
use copyless_vfs::memory::MemoryVfs;
use copyless_vfs::posix::PosixVfs;
use copyless_vfs::{Disposition, Identity, Kind, OpenRequest, Vfs};

pub const NOW: u64 = 133_000_000_000_000_000;

/// Users and passwords that can change while the server runs, as the user
/// store can.
#[derive(Default)]
pub struct Users {
    hashes: Mutex<HashMap<String, [u8; 16]>>,
    accounts: Mutex<HashMap<String, Arc<UnixAccount>>>,
    generation: AtomicU64,
}

impl Users {
    pub fn add(&self, name: &str, password: &str) {
        let mut h = self.hashes.lock().unwrap();
        h.insert(name.to_lowercase(), copyless_auth::nt_hash(password));
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Links `name` to a Unix account with these ids.
    pub fn link(&self, name: &str, uid: u32, gid: u32, groups: Vec<u32>) {
        let account = UnixAccount {
            name: name.to_lowercase(),
            uid,
            gid,
            groups,
        };
        let mut a = self.accounts.lock().unwrap();
        a.insert(name.to_lowercase(), Arc::new(account));
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    pub fn remove(&self, name: &str) {
        self.hashes.lock().unwrap().remove(&name.to_lowercase());
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl Credentials for Users {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.hashes
            .lock()
            .unwrap()
            .get(&user.to_lowercase())
            .copied()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn unix_account(&self, user: &str) -> Option<Arc<UnixAccount>> {
        self.accounts
            .lock()
            .unwrap()
            .get(&user.to_lowercase())
            .cloned()
    }
}

/// The clock and randomness the core sees: deterministic, so a failure
/// reproduces.
pub struct TestEnv {
    state: u64,
    /// Windows FILETIME; starts at [`NOW`], moved on by whoever drives.
    pub now: u64,
    /// The core is driven as an engine's loop drives it, where it may not
    /// wait for a filesystem (`Env::may_wait`).
    pub on_loop: bool,
}

impl TestEnv {
    pub fn new(seed: u64) -> TestEnv {
        TestEnv {
            // xorshift never leaves zero.
            state: seed.max(1),
            now: NOW,
            on_loop: false,
        }
    }

    /// xorshift64.
    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }
}

impl Env for TestEnv {
    fn now(&self) -> u64 {
        self.now
    }

    fn fill_random(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next_u64() as u8;
        }
    }

    fn may_wait(&self) -> bool {
        !self.on_loop
    }
}

/// Generous limits, for a test to narrow.
pub fn limits() -> Limits {
    Limits {
        max_message_size: (8 << 20) + (64 << 10),
        max_preauth_message_size: 64 << 10,
        max_io_size: 8 << 20,
        max_credits: 8192,
        max_sessions: 8,
        max_tree_connects: 16,
        max_open_files: 1000,
        max_open_files_per_connection: 1000,
        max_open_files_per_user: 1000,
        max_open_files_total: 1000,
        max_listing_bytes: 64 << 20,
        max_listing_bytes_per_user: 64 << 20,
        max_listing_bytes_total: 256 << 20,
    }
}

/// The server's configuration for tests: signing required, generous
/// limits unless a test narrows them.
pub fn config() -> ServerConfig {
    ServerConfig {
        server_name: "TEST".into(),
        server_comment: String::new(),
        min_dialect: copyless_proto::negotiate::DIALECT_202,
        max_dialect: copyless_proto::negotiate::DIALECT_311,
        signing_required: true,
        encrypt_data: false,
        reject_unencrypted: false,
        allow_guest: false,
        unknown_users_as_guests: false,
        multichannel: true,
        change_notify: true,
        kerberos: None,
        limits: limits(),
        server_guid: [1; 16],
        start_time: 0,
        unix_uid: 0,
        unix_gid: 0,
        act_as_users: false,
        guest_identity: Identity::Server,
        machine_sid: [11, 22, 33],
        quota_admins: Vec::new(),
    }
}

pub fn server(dir: &Path, config: ServerConfig, users: Arc<Users>) -> Arc<Server> {
    let vfs = Arc::new(PosixVfs::new(dir).unwrap());
    server_over(vfs, &dir.display().to_string(), config, users)
}

/// A server whose share lives in memory: no disk, and the same run gives
/// the same times and file ids. The VFS is handed back too, for a test to
/// put files in place or look at what the client left.
pub fn memory_server(config: ServerConfig, users: Arc<Users>) -> (Arc<Server>, Arc<MemoryVfs>) {
    let vfs = Arc::new(MemoryVfs::new());
    (server_over(vfs.clone(), "memory", config, users), vfs)
}

/// A server with one share, "share", over `vfs`; `path` is what the server
/// says the share's local path is.
pub fn server_over(
    vfs: Arc<dyn Vfs>,
    path: &str,
    config: ServerConfig,
    users: Arc<Users>,
) -> Arc<Server> {
    shares_over(
        vfs,
        path,
        config,
        users,
        &[("share", false, ShareAccess::default())],
    )
}

/// A server whose shares, each (name, read only, who may use it), all lie
/// over `vfs`.
pub fn shares_over(
    vfs: Arc<dyn Vfs>,
    path: &str,
    config: ServerConfig,
    users: Arc<Users>,
    shares: &[(&str, bool, ShareAccess)],
) -> Arc<Server> {
    let shares = shares
        .iter()
        .map(|(name, read_only, access)| Share {
            name: (*name).into(),
            vfs: vfs.clone(),
            read_only: *read_only,
            path: path.into(),
            comment: String::new(),
            names: Default::default(),
            owner: None,
            access: access.clone(),
            audit: Default::default(),
            snapshots: None,
            recycle: None,
        })
        .collect();
    Server::new(config, shares, users)
}

/// Puts a file with `data` at `path` in a share, replacing one there.
pub fn put_file(vfs: &dyn Vfs, path: &str, data: &[u8]) {
    let opened = vfs
        .open(&OpenRequest {
            who: &Identity::Server,
            path,
            disposition: Disposition::OverwriteIf,
            kind: Kind::NonDirectory,
            read: false,
            write: true,
            attributes: 0,
            allocation_size: 0,
            unlink_asked: false,
        })
        .unwrap_or_else(|e| panic!("put {path}: {e}"));
    vfs.write(&opened.handle, 0, data).unwrap();
}

/// The data of the file at `path` in a share.
pub fn file_contents(vfs: &dyn Vfs, path: &str) -> Vec<u8> {
    let opened = vfs
        .open(&OpenRequest {
            who: &Identity::Server,
            path,
            disposition: Disposition::Open,
            kind: Kind::NonDirectory,
            read: true,
            write: false,
            attributes: 0,
            allocation_size: 0,
            unlink_asked: false,
        })
        .unwrap_or_else(|e| panic!("read {path}: {e}"));
    let mut data = vec![0; opened.stat.size as usize];
    let n = vfs.read(&opened.handle, 0, &mut data).unwrap();
    data.truncate(n);
    data
}

/// One request to send: the command, its body (after the header), and
/// the credit charge it claims.
pub struct Request {
    pub command: u16,
    pub body: Vec<u8>,
    pub charge: u16,
    /// Sent with the related-operations flag (inside a compound).
    pub related: bool,
}

impl Request {
    pub fn new(command: u16, charge: u16, build: impl FnOnce(&mut Writer)) -> Request {
        let mut w = Writer::new();
        w.zeros(HEADER_LEN);
        build(&mut w);
        Request {
            command,
            body: w.buf[HEADER_LEN..].to_vec(),
            charge,
            related: false,
        }
    }
}

/// A reply as the client sees it.
pub struct Reply {
    pub header: Header,
    pub msg: Vec<u8>,
}

impl Reply {
    pub fn status(&self) -> u32 {
        self.header.status
    }
}

/// The dialect a client offers (and the server picks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// HMAC-SHA256 signing, no encryption.
    Smb210,
    /// Pre-authentication integrity, AES-GMAC signing, AES-128-GCM
    /// encryption.
    Smb311,
}

pub struct Client {
    pub conn: Connection,
    pub env: TestEnv,
    pub next_mid: u64,
    pub session_id: u64,
    pub tree_id: u32,
    pub dialect: Dialect,
    /// 3.1.1: the hash of the connection's NEGOTIATE exchange.
    preauth: PreauthHash,
    signing_algorithm: SigningAlgorithm,
    key: Option<SigningKey>,
    crypt: Option<SessionCiphers>,
    /// Credits granted and not yet used.
    pub credits: u64,
    /// The connection was closed by the server.
    pub closed: bool,
    /// Sign nothing, and ask for no signing at SESSION_SETUP (the server
    /// must not require it).
    pub unsigned: bool,
    /// Letters the server addressed to other connections, for the test to
    /// deliver (see [`Client::receive`]).
    pub posted: Vec<Message>,
    /// What the server reported to the engine (logons), oldest first.
    pub events: Vec<Event>,
    /// The Capabilities its NEGOTIATE asks for: by default what Windows
    /// asks for.
    pub capabilities: u32,
    /// The Capabilities the server's NEGOTIATE answer gave.
    pub server_capabilities: u32,
}

const CIPHER: CipherId = CipherId::Aes128Gcm;

impl Client {
    pub fn connect(server: Arc<Server>) -> Client {
        Client::connect_from(server, "127.0.0.1:50000".parse().unwrap())
    }

    /// A connection from a client at `peer`.
    pub fn connect_from(server: Arc<Server>, peer: SocketAddr) -> Client {
        let addr: SocketAddr = "127.0.0.1:445".parse().unwrap();
        Client {
            conn: Connection::new(server, peer, addr),
            env: TestEnv::new(0x9e37_79b9_7f4a_7c15),
            next_mid: 0,
            session_id: 0,
            tree_id: 0,
            dialect: Dialect::Smb210,
            preauth: PreauthHash::new(),
            signing_algorithm: SigningAlgorithm::HmacSha256,
            key: None,
            crypt: None,
            credits: 1,
            closed: false,
            unsigned: false,
            posted: Vec::new(),
            events: Vec::new(),
            capabilities: neg::CAP_DFS
                | neg::CAP_LEASING
                | neg::CAP_LARGE_MTU
                | neg::CAP_MULTI_CHANNEL
                | neg::CAP_DIRECTORY_LEASING
                | neg::CAP_ENCRYPTION,
            server_capabilities: 0,
        }
    }

    /// Negotiates SMB 2.1, logs in as `user` and connects to the share.
    pub fn login(server: Arc<Server>, user: &str, password: &str) -> Client {
        Client::login_with(server, Dialect::Smb210, user, password)
    }

    /// As [`Client::login`], in `dialect`.
    pub fn login_with(server: Arc<Server>, dialect: Dialect, user: &str, password: &str) -> Client {
        let mut c = Client::connect(server);
        c.dialect = dialect;
        c.negotiate();
        c.session_setup(user, password)
            .unwrap_or_else(|s| panic!("login as {user}: status {s:#x}"));
        assert_eq!(c.tree_connect("share"), status::SUCCESS);
        c
    }

    /// A connection that has negotiated `dialect` and has no session yet.
    pub fn negotiated(server: Arc<Server>, dialect: Dialect) -> Client {
        let mut c = Client::connect(server);
        c.dialect = dialect;
        c.negotiate();
        c
    }

    pub fn negotiate(&mut self) {
        let (dialect, contexts) = match self.dialect {
            Dialect::Smb210 => (DIALECT_210, Vec::new()),
            Dialect::Smb311 => (
                DIALECT_311,
                vec![
                    (neg::CTX_PREAUTH_INTEGRITY, neg::preauth_context(&[9; 32])),
                    (neg::CTX_ENCRYPTION, neg::id_list_context(&[CIPHER.id()])),
                    (
                        neg::CTX_SIGNING,
                        neg::id_list_context(&[SigningAlgorithm::AesGmac.id()]),
                    ),
                ],
            ),
        };
        let frame = self.frame(vec![Request::new(command::NEGOTIATE, 1, |w| {
            wire::write_negotiate_request(
                w,
                &NegotiateOffer {
                    security_mode: neg::SIGNING_ENABLED | neg::SIGNING_REQUIRED,
                    capabilities: self.capabilities,
                    client_guid: [5; 16],
                    dialects: &[dialect],
                    contexts: &contexts,
                },
            )
            .unwrap()
        })]);
        let r = self.handle_frame(&frame).remove(0);
        assert_eq!(r.status(), status::SUCCESS, "NEGOTIATE");
        let reply = NegotiateReply::parse(&r.msg).unwrap();
        assert_eq!(reply.dialect, dialect);
        self.server_capabilities = reply.capabilities;
        if self.dialect == Dialect::Smb311 {
            self.preauth.update(&frame);
            self.preauth.update(&r.msg);
            let signing = reply.context(neg::CTX_SIGNING).unwrap();
            let ids = neg::parse_id_list(signing.data).unwrap();
            self.signing_algorithm = SigningAlgorithm::from_id(ids[0]).unwrap();
        }
    }

    /// Authenticates a new session; Err carries the failing status.
    pub fn session_setup(&mut self, user: &str, password: &str) -> Result<(), u32> {
        self.session_setup_after(user, password, 0)
    }

    /// As [`Client::session_setup`], naming `previous` as the session the
    /// client had before it reconnected.
    pub fn session_setup_after(
        &mut self,
        user: &str,
        password: &str,
        previous: u64,
    ) -> Result<(), u32> {
        self.session_id = 0;
        self.key = None;
        self.crypt = None;
        self.authenticate(user, password, previous)
    }

    /// Re-authenticates the current session, as `user` (who may be
    /// someone else): the session keeps its id and keys.
    pub fn reauthenticate(&mut self, user: &str, password: &str) -> Result<(), u32> {
        self.authenticate(user, password, 0)
    }

    /// Binds this connection to `home`'s session as a channel (SMB 3
    /// multichannel): `user` logs on again here, each leg signed with the
    /// session's key, and the channel then signs with a key of its own.
    /// The session's requests sent here are relayed to `home` by letters
    /// (see [`Client::posted`]).
    pub fn bind(&mut self, home: &Client, user: &str, password: &str) -> Result<(), u32> {
        self.authenticate_as(user, password, 0, Some(home))
    }

    fn authenticate(&mut self, user: &str, password: &str, previous: u64) -> Result<(), u32> {
        self.authenticate_as(user, password, previous, None)
    }

    fn authenticate_as(
        &mut self,
        user: &str,
        password: &str,
        previous: u64,
        home: Option<&Client>,
    ) -> Result<(), u32> {
        let reauth = self.key.is_some();
        let identity = ClientIdentity {
            user: user.into(),
            domain: String::new(),
            password: password.into(),
            workstation: "TEST".into(),
        };
        let random = InitiatorRandom {
            client_challenge: [3; 8],
            session_key: [4; 16],
        };
        let mut init = Initiator::new(identity, random, NOW);
        let InitiatorStep::Send(mut token) = init.step(&[]).unwrap() else {
            panic!("no first token");
        };
        let mut preauth = self.preauth.clone();
        loop {
            let mut req = Request::new(command::SESSION_SETUP, 1, |w| {
                let security_mode = if self.unsigned { 1 } else { 2 };
                wire::write_session_setup_request(w, security_mode, 0, previous, &token).unwrap()
            });
            let frame = match home {
                Some(home) => {
                    req.body[2] = 1; // SMB2_SESSION_FLAG_BINDING
                    self.frame_as(home, vec![req])
                }
                None => self.frame(vec![req]),
            };
            preauth.update(&frame);
            let r = self.handle_frame(&frame).remove(0);
            self.session_id = r.header.session_id;
            let reply = SessionSetupReply::parse(&r.msg).unwrap();
            match r.status() {
                status::MORE_PROCESSING_REQUIRED => {
                    preauth.update(&r.msg);
                    match init.step(reply.security_buffer) {
                        Ok(InitiatorStep::Send(t)) => token = t,
                        other => panic!("NTLM: {other:?}"),
                    }
                }
                status::SUCCESS if reauth => {
                    // Signed with the keys the session already had.
                    assert!(self.key.as_ref().unwrap().verify(&r.msg));
                    return Ok(());
                }
                status::SUCCESS => {
                    let key = init.session_key().unwrap();
                    self.take_keys(&key, &preauth, home);
                    // The reply that ends the exchange is signed.
                    assert!(self.key.as_ref().unwrap().verify(&r.msg));
                    return Ok(());
                }
                s => return Err(s),
            }
        }
    }

    /// Authenticates a new session in one round with `token` (a Kerberos
    /// AP-REQ inside SPNEGO, made elsewhere), whose context key is
    /// `full_key`; Err carries the failing status.
    pub fn session_setup_token(&mut self, token: &[u8], full_key: &[u8]) -> Result<(), u32> {
        self.session_id = 0;
        self.key = None;
        self.crypt = None;
        let req = Request::new(command::SESSION_SETUP, 1, |w| {
            wire::write_session_setup_request(w, 2, 0, 0, token).unwrap()
        });
        let frame = self.frame(vec![req]);
        let mut preauth = self.preauth.clone();
        preauth.update(&frame);
        let r = self.handle_frame(&frame).remove(0);
        self.session_id = r.header.session_id;
        if r.status() != status::SUCCESS {
            return Err(r.status());
        }
        self.take_keys(full_key, &preauth, None);
        assert!(self.key.as_ref().unwrap().verify(&r.msg));
        Ok(())
    }

    /// Derives the session's keys from the key its authentication gave
    /// (Session.FullSessionKey); a channel of `home` signs only.
    fn take_keys(&mut self, full_key: &[u8], preauth: &PreauthHash, home: Option<&Client>) {
        let key = copyless_auth::smb_session_key(full_key);
        let (dialect, hash) = match self.dialect {
            Dialect::Smb210 => (DIALECT_210, &[0; 64]),
            Dialect::Smb311 => (DIALECT_311, preauth.value()),
        };
        self.key = Some(signing_key(dialect, self.signing_algorithm, &key, hash));
        if let Some(home) = home {
            // A channel: the session's ids; sealing (with the session's
            // keys) is not scripted.
            self.tree_id = home.tree_id;
        } else {
            self.crypt = SessionCiphers::derive_for_client(dialect, CIPHER, &key, full_key, hash);
        }
    }

    /// The frame in a transform header, encrypted for the session (SMB
    /// 3.1.1 only; None otherwise).
    pub fn seal(&mut self, frame: &[u8]) -> Option<Vec<u8>> {
        let salt = [0; 8];
        Some(self.crypt.as_mut()?.seal(self.session_id, frame, salt))
    }

    /// A received frame in a transform header, decrypted; it must be one
    /// of this session's.
    fn open_sealed(&self, frame: &[u8]) -> Vec<u8> {
        let sealed = Sealed::parse(frame).expect("a well-formed transform header");
        assert_eq!(
            sealed.header.session_id, self.session_id,
            "encrypted for another session"
        );
        let crypt = self
            .crypt
            .as_ref()
            .expect("encrypted, but the session has no keys");
        crypt.open(&sealed).expect("a reply that does not decrypt")
    }

    pub fn tree_connect(&mut self, share: &str) -> u32 {
        let r = self.call(Request::new(command::TREE_CONNECT, 1, |w| {
            wire::write_tree_connect_request(w, &format!("\\\\server\\{share}")).unwrap()
        }));
        if r.status() == status::SUCCESS {
            self.tree_id = r.header.tree_id;
        }
        r.status()
    }

    /// Sends one request and returns its reply.
    pub fn call(&mut self, req: Request) -> Reply {
        let mut replies = self.send(vec![req]);
        assert_eq!(replies.len(), 1, "one reply expected");
        replies.remove(0)
    }

    /// Sends requests as one frame (a compound when more than one) and
    /// returns the replies the server sent back.
    pub fn send(&mut self, reqs: Vec<Request>) -> Vec<Reply> {
        let frame = self.frame(reqs);
        self.handle_frame(&frame)
    }

    /// The frame [`Client::send`] would send, for a test to change before
    /// it goes.
    pub fn frame(&mut self, reqs: Vec<Request>) -> Vec<u8> {
        let mids: Vec<u64> = reqs
            .iter()
            .map(|r| {
                let mid = self.next_mid;
                self.next_mid += u64::from(r.charge.max(1));
                self.credits = self.credits.saturating_sub(u64::from(r.charge.max(1)));
                mid
            })
            .collect();
        self.frame_with_mids(reqs, &mids)
    }

    /// A frame sent on this connection in `owner`'s session (its ids,
    /// signed with its key), as a client does that binds this connection
    /// to a session it holds on another.
    pub fn frame_as(&mut self, owner: &Client, reqs: Vec<Request>) -> Vec<u8> {
        let mids: Vec<u64> = reqs
            .iter()
            .map(|r| {
                let mid = self.next_mid;
                self.next_mid += u64::from(r.charge.max(1));
                mid
            })
            .collect();
        owner.frame_with_mids(reqs, &mids)
    }

    /// The message's signature is this session's.
    pub fn verifies(&self, msg: &[u8]) -> bool {
        self.key.as_ref().is_some_and(|k| k.verify(msg))
    }

    /// As [`Client::send`], with message ids chosen by the caller.
    pub fn send_with_mids(&mut self, reqs: Vec<Request>, mids: &[u64]) -> Vec<Reply> {
        let frame = self.frame_with_mids(reqs, mids);
        self.handle_frame(&frame)
    }

    fn frame_with_mids(&self, reqs: Vec<Request>, mids: &[u64]) -> Vec<u8> {
        let n = reqs.len();
        let mut frame = Vec::new();
        for (i, (req, mid)) in reqs.into_iter().zip(mids).enumerate() {
            let start = frame.len();
            let mut flags = 0;
            if self.key.is_some() && !self.unsigned {
                flags |= FLAG_SIGNED;
            }
            if req.related {
                flags |= FLAG_RELATED_OPERATIONS;
            }
            Header {
                credit_charge: req.charge,
                command: req.command,
                credits: 256,
                flags,
                message_id: *mid,
                tree_id: self.tree_id,
                session_id: self.session_id,
                ..Header::default()
            }
            .write(&mut frame);
            frame.extend_from_slice(&req.body);
            if i + 1 < n {
                let padded = (frame.len() - start).next_multiple_of(8);
                frame.resize(start + padded, 0);
                let next = (frame.len() - start) as u32;
                frame[start + 20..start + 24].copy_from_slice(&next.to_le_bytes());
            }
            self.sign(&mut frame[start..]);
        }
        frame
    }

    /// Sends a CANCEL of the request that had the interim response with
    /// `async_id` (MS-SMB2 2.2.30), and returns what came back: the
    /// request's final response, if the cancel ended it.
    pub fn cancel(&mut self, async_id: u64) -> Vec<Reply> {
        let mut frame = Vec::new();
        let signed = if self.key.is_some() && !self.unsigned {
            FLAG_SIGNED
        } else {
            0
        };
        Header {
            command: command::CANCEL,
            flags: FLAG_ASYNC_COMMAND | signed,
            async_id,
            session_id: self.session_id,
            ..Header::default()
        }
        .write(&mut frame);
        frame.extend_from_slice(&[4, 0, 0, 0]);
        self.sign(&mut frame);
        self.handle_frame(&frame)
    }

    /// The session signs: requests need [`Client::sign`].
    pub fn is_signing(&self) -> bool {
        self.key.is_some()
    }

    /// Signs one message of a frame with the session's key, when there
    /// is one.
    pub fn sign(&self, msg: &mut [u8]) {
        if let Some(key) = self.key.as_ref().filter(|_| !self.unsigned) {
            key.sign(msg);
        }
    }

    /// Hands the core a copy of a frame, which it may decrypt in place as
    /// it does the engines' frames, and returns the replies, checked:
    /// every frame fits the transport, every message parses, and every
    /// signed reply on this client's session carries a valid signature.
    /// Intents and calls are performed at once, through the share's VFS,
    /// as the threaded engine performs them.
    pub fn handle_frame(&mut self, frame: &[u8]) -> Vec<Reply> {
        let mut frame = frame.to_vec();
        let out = self.conn.handle_in_place(&mut frame, &mut self.env);
        let out = self.conn.perform_intents(out, &frame, &mut self.env);
        self.take(out)
    }

    /// Hands the core a frame and returns what it asks of the engine
    /// untouched: its intents and calls are the caller's to complete.
    pub fn handle_raw(&mut self, frame: &[u8]) -> Output {
        self.conn.handle(frame, &mut self.env)
    }

    /// Hands the core an intent's or a call's result, as the engine does.
    pub fn complete(&mut self, token: Token, done: Completion) -> Output {
        self.conn.complete(token, done, &mut self.env)
    }

    /// Hands the core a letter from another connection, as the engine
    /// does, and returns what it sent this client.
    pub fn receive(&mut self, letter: Letter) -> Vec<Reply> {
        let out = self.conn.receive(letter, &mut self.env);
        let out = self.conn.perform_intents(out, &[], &mut self.env);
        self.take(out)
    }

    /// Lets time pass for the core, as the engine's timer does.
    pub fn tick(&mut self) -> Vec<Reply> {
        let out = self.conn.handle_timeout(&mut self.env);
        let out = self.conn.perform_intents(out, &[], &mut self.env);
        self.take(out)
    }

    /// The replies of `out`, checked as [`Client::handle_frame`] checks
    /// them; `out` must have no intents or calls left.
    pub fn take(&mut self, out: Output) -> Vec<Reply> {
        assert!(out.intents.is_empty(), "intents left: {:?}", out.intents);
        assert!(out.calls.is_empty(), "calls left: {:?}", out.calls);
        self.posted.extend(out.messages);
        self.events.extend(out.events);
        if out.disconnect {
            self.closed = true;
        }
        let mut replies = Vec::new();
        for f in &out.frames {
            assert!(f.len() <= 0x00FF_FFFF, "a frame of {} bytes", f.len());
            let opened;
            let f = if f.starts_with(&copyless_proto::header::TRANSFORM_PROTOCOL_ID) {
                opened = self.open_sealed(f);
                &opened
            } else {
                f
            };
            for m in copyless_proto::compound::split(f).unwrap() {
                let header = Header::parse(m).unwrap();
                // As Samba's client: STATUS_USER_SESSION_DELETED comes
                // with the request's signature echoed, not a signature of
                // its own (the server has no key for that session).
                let echoed = header.status == status::USER_SESSION_DELETED;
                if let Some(key) = self.key.as_ref().filter(|_| !echoed) {
                    if header.is_signed() && header.session_id == self.session_id {
                        assert!(key.verify(m), "a reply with a bad signature: {header:?}");
                    }
                }
                self.credits += u64::from(header.credits);
                replies.push(Reply {
                    header,
                    msg: m.to_vec(),
                });
            }
        }
        replies
    }

    pub fn create(&mut self, name: &str, directory: bool) -> Result<FileId, u32> {
        self.open(create_request(name, directory))
    }

    /// Sends a CREATE: the file id it opened, or its status.
    pub fn open(&mut self, create: Request) -> Result<FileId, u32> {
        let r = self.call(create);
        match r.status() {
            status::SUCCESS => Ok(wire::CreateReply::parse(&r.msg).unwrap().file_id),
            s => Err(s),
        }
    }

    pub fn close(&mut self, id: FileId) -> u32 {
        self.call(close_request(id)).status()
    }
}

/// CREATE for read and write, opening or creating `name`.
pub fn create_request(name: &str, directory: bool) -> Request {
    let options = if directory { 1 } else { 0x40 };
    // FILE_OPEN_IF, sharing read, write and delete.
    create_request_with(name, 0x0012_019f, 7, 3, options)
}

/// FILE_RENAME_INFORMATION for SMB2: ReplaceIfExists, 7 reserved bytes,
/// RootDirectory, FileNameLength, FileName.
pub fn rename_info(new_name: &str, replace: bool) -> Vec<u8> {
    let name = copyless_proto::utf16::encode(new_name);
    let mut out = vec![0u8; 20];
    out[0] = u8::from(replace);
    out[16..20].copy_from_slice(&(name.len() as u32).to_le_bytes());
    out.extend_from_slice(&name);
    out.resize(out.len().max(24), 0);
    out
}

/// CREATE of `name` with the access mask, share access, disposition and
/// create options given (MS-SMB2 2.2.13).
pub fn create_request_with(
    name: &str,
    desired_access: u32,
    share_access: u32,
    disposition: u32,
    options: u32,
) -> Request {
    create_request_from(&CreateParams {
        oplock_level: 0,
        desired_access,
        file_attributes: 0,
        share_access,
        disposition,
        options,
        name,
        contexts: &[],
    })
}

/// CREATE with every field as `params` says.
pub fn create_request_from(params: &CreateParams<'_>) -> Request {
    Request::new(command::CREATE, 1, |w| {
        wire::write_create_request(w, params).unwrap()
    })
}

/// QUERY_DIRECTORY of folder open `id` for FILE_NAMES_INFORMATION
/// (class 12), with `flags` and `pattern`, in a buffer of `room` bytes.
pub fn names_request(id: FileId, flags: u8, pattern: &str, room: u32) -> Request {
    Request::new(command::QUERY_DIRECTORY, 1, |w| {
        wire::write_query_directory_request(w, 12, flags, id, pattern, room).unwrap()
    })
}

/// The names in a FILE_NAMES_INFORMATION listing (a QUERY_DIRECTORY
/// reply's buffer), in order.
pub fn names_in(buf: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 12 <= buf.len() {
        let next = u32::from_le_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(buf[at + 8..at + 12].try_into().unwrap()) as usize;
        let units: Vec<u16> = buf[at + 12..at + 12 + len]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        out.push(String::from_utf16(&units).unwrap());
        if next == 0 {
            break;
        }
        at += next;
    }
    out
}

pub fn close_request(id: FileId) -> Request {
    Request::new(command::CLOSE, 1, |w| wire::write_close_request(w, 0, id))
}

/// CHANGE_NOTIFY on directory open `id` (MS-SMB2 2.2.35): the changes
/// `filter` names, beneath it too when `recursive`, in a buffer of `room`
/// bytes.
pub fn notify_request(id: FileId, filter: u32, recursive: bool, room: u32) -> Request {
    Request::new(command::CHANGE_NOTIFY, 1, |w| {
        w.u16(32).u16(u16::from(recursive)).u32(room);
        w.u64(id.persistent).u64(id.volatile);
        w.u32(filter).u32(0);
    })
}

/// LOCK on open `id` (MS-SMB2 2.2.26) with LockSequence `sequence`:
/// one element per (offset, length, flags).
pub fn lock_request(id: FileId, sequence: u32, ranges: &[(u64, u64, u32)]) -> Request {
    Request::new(command::LOCK, 1, |w| {
        w.u16(48).u16(ranges.len() as u16).u32(sequence);
        w.u64(id.persistent).u64(id.volatile);
        for &(offset, length, flags) in ranges {
            w.u64(offset).u64(length).u32(flags).u32(0);
        }
    })
}

/// The (action, name) entries of a successful CHANGE_NOTIFY response.
pub fn notify_entries(r: &Reply) -> Vec<(u32, String)> {
    assert_eq!(r.status(), status::SUCCESS);
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let body = &r.msg[HEADER_LEN..];
    let len = u32_at(body, 4) as usize;
    let mut buf = &r.msg[HEADER_LEN + 8..HEADER_LEN + 8 + len];
    let mut out = Vec::new();
    loop {
        let (next, action, n) = (u32_at(buf, 0), u32_at(buf, 4), u32_at(buf, 8) as usize);
        let units: Vec<u16> = buf[12..12 + n]
            .chunks(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        out.push((action, String::from_utf16(&units).unwrap()));
        if next == 0 {
            return out;
        }
        buf = &buf[next as usize..];
    }
}

/// A WRITE of `data` at `offset`, charged one credit.
pub fn write_request(id: FileId, offset: u64, data: &[u8]) -> Request {
    Request::new(command::WRITE, 1, |w| {
        wire::write_write_request_head(w, id, offset, data.len() as u32, 0);
        w.bytes(data);
    })
}

pub fn read_request(id: FileId, offset: u64, length: u32, charge: u16) -> Request {
    Request::new(command::READ, charge, |w| {
        wire::write_read_request(w, id, offset, length, 0)
    })
}
