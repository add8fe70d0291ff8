//! Connecting: NEGOTIATE, SESSION_SETUP with NTLMv2 in SPNEGO, and
//! TREE_CONNECT (MS-SMB2 3.2.4.2, 3.2.5.2, 3.2.5.3).

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use copyless_auth::{ClientIdentity, Initiator, InitiatorRandom, InitiatorStep};
use copyless_crypto::{CipherId, PreauthHash, SigningAlgorithm};
use copyless_proto::client::{
    self as wire, NegotiateOffer, NegotiateReply, SessionSetupReply, TreeConnectReply,
};
use copyless_proto::command;
use copyless_proto::messages::SESSION_FLAG_ENCRYPT_DATA;
use copyless_proto::negotiate as neg;
use copyless_proto::status;

use super::security::{signing_key, Crypt};
use super::{Connection, Error, Msg};

/// Whether the client asks for signing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signing {
    /// SecurityMode SIGNING_REQUIRED: every request and reply is signed.
    Required,
    /// Only SIGNING_ENABLED, as every SMB2 client must: the session is
    /// unsigned unless the server requires signing.
    Off,
}

/// Where to connect and how to authenticate.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// HOST:PORT.
    pub address: String,
    pub share: String,
    pub user: String,
    pub password: String,
    /// Empty: the server's own domain.
    pub domain: String,
    pub signing: Signing,
    pub encrypt: bool,
    /// The highest dialect offered (0x0202 ... 0x0311).
    pub max_dialect: u16,
}

const DIALECTS: [u16; 5] = [
    neg::DIALECT_202,
    neg::DIALECT_210,
    neg::DIALECT_300,
    neg::DIALECT_302,
    neg::DIALECT_311,
];

/// Ciphers offered in 3.1.1, preferred first (what Windows 11 offers).
const CIPHERS: [CipherId; 4] = [
    CipherId::Aes128Gcm,
    CipherId::Aes128Ccm,
    CipherId::Aes256Gcm,
    CipherId::Aes256Ccm,
];

fn random<const N: usize>() -> Result<[u8; N], Error> {
    let mut out = [0u8; N];
    getrandom::fill(&mut out)
        .map_err(|e| Error::Protocol(format!("no randomness from the system: {e}")))?;
    Ok(out)
}

/// Windows FILETIME: 100 ns units since 1601.
fn filetime_now() -> u64 {
    const EPOCH_DIFF_SECS: u64 = 11_644_473_600;
    let since_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    (since_unix.as_secs() + EPOCH_DIFF_SECS) * 10_000_000
        + u64::from(since_unix.subsec_nanos() / 100)
}

/// Connects, authenticates and connects the tree.
pub fn connect(opts: &ClientOptions) -> Result<Connection, Error> {
    let addr = opts
        .address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| Error::Protocol(format!("cannot resolve {}", opts.address)))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_nodelay(true)?;
    stream.set_nonblocking(true)?;
    let mut conn = Connection::new(stream);
    let mut preauth = PreauthHash::new();
    let (negotiated, cipher) = negotiate(&mut conn, opts, &mut preauth)?;
    session_setup(&mut conn, opts, preauth, negotiated, cipher)?;
    tree_connect(&mut conn, opts)?;
    Ok(conn)
}

/// What NEGOTIATE settled beyond what the connection keeps.
struct Negotiated {
    server_security_mode: u16,
    signing_algorithm: SigningAlgorithm,
    server_caps: u32,
}

fn negotiate(
    conn: &mut Connection,
    opts: &ClientOptions,
    preauth: &mut PreauthHash,
) -> Result<(Negotiated, Option<CipherId>), Error> {
    let dialects: Vec<u16> = DIALECTS
        .iter()
        .copied()
        .filter(|d| *d <= opts.max_dialect)
        .collect();
    if dialects.is_empty() {
        return Err(Error::Protocol("no dialect to offer".into()));
    }
    let security_mode = match opts.signing {
        Signing::Required => neg::SIGNING_ENABLED | neg::SIGNING_REQUIRED,
        Signing::Off => neg::SIGNING_ENABLED,
    };
    let cipher_ids: Vec<u16> = CIPHERS.iter().map(|c| c.id()).collect();
    let contexts = vec![
        (neg::CTX_PREAUTH_INTEGRITY, neg::preauth_context(&random()?)),
        (neg::CTX_ENCRYPTION, neg::id_list_context(&cipher_ids)),
        (
            neg::CTX_SIGNING,
            neg::id_list_context(&[
                SigningAlgorithm::AesGmac.id(),
                SigningAlgorithm::AesCmac.id(),
            ]),
        ),
    ];
    let mut msg = Msg::new(command::NEGOTIATE);
    wire::write_negotiate_request(
        &mut msg.buf,
        &NegotiateOffer {
            security_mode,
            capabilities: neg::CAP_LARGE_MTU | neg::CAP_ENCRYPTION,
            client_guid: random()?,
            dialects: &dialects,
            contexts: &contexts,
        },
    )?;
    conn.sent_log = Some(Vec::new());
    conn.submit(vec![msg])?;
    let sent = conn.sent_log.take().unwrap_or_default();
    let reply = conn.next_reply()?.check("")?;
    let r = NegotiateReply::parse(&reply.msg)?;
    if !dialects.contains(&r.dialect) {
        return Err(Error::Protocol(format!(
            "server chose dialect {:#06x}, which was not offered",
            r.dialect
        )));
    }
    conn.dialect = r.dialect;
    conn.max_read = r.max_read_size;
    conn.max_write = r.max_write_size;
    conn.max_transact = r.max_transact_size;
    conn.large_mtu = r.dialect >= neg::DIALECT_210 && r.capabilities & neg::CAP_LARGE_MTU != 0;
    if !conn.large_mtu {
        // Without multi-credit requests one request carries at most 64 KiB.
        conn.max_read = conn.max_read.min(65536);
        conn.max_write = conn.max_write.min(65536);
    }
    let mut signing_algorithm = SigningAlgorithm::AesCmac;
    let mut cipher = None;
    if r.dialect == neg::DIALECT_311 {
        for m in &sent {
            preauth.update(m);
        }
        preauth.update(&reply.msg);
        if let Some(c) = r.context(neg::CTX_SIGNING) {
            let ids = neg::parse_id_list(c.data)?;
            if let Some(a) = ids.first().and_then(|id| SigningAlgorithm::from_id(*id)) {
                signing_algorithm = a;
            }
        }
        if let Some(c) = r.context(neg::CTX_ENCRYPTION) {
            let ids = neg::parse_id_list(c.data)?;
            cipher = ids.first().and_then(|id| CipherId::from_id(*id));
        }
    } else if r.dialect >= neg::DIALECT_300 && r.capabilities & neg::CAP_ENCRYPTION != 0 {
        cipher = Some(CipherId::Aes128Ccm);
    }
    Ok((
        Negotiated {
            server_security_mode: r.security_mode,
            signing_algorithm,
            server_caps: r.capabilities,
        },
        cipher,
    ))
}

fn session_setup(
    conn: &mut Connection,
    opts: &ClientOptions,
    mut preauth: PreauthHash,
    negotiated: Negotiated,
    cipher: Option<CipherId>,
) -> Result<(), Error> {
    let identity = ClientIdentity {
        user: opts.user.clone(),
        domain: opts.domain.clone(),
        password: opts.password.clone(),
        workstation: "COPYLESSBENCH".into(),
    };
    let randomness = InitiatorRandom {
        client_challenge: random()?,
        session_key: random()?,
    };
    let mut init = Initiator::new(identity, randomness, filetime_now());
    let auth_err = |e| Error::Protocol(format!("NTLM authentication: {e:?}"));
    let InitiatorStep::Send(mut token) = init.step(&[]).map_err(auth_err)? else {
        return Err(Error::Protocol("NTLM produced no first token".into()));
    };
    let security_mode = match opts.signing {
        Signing::Required => neg::SIGNING_ENABLED | neg::SIGNING_REQUIRED,
        Signing::Off => neg::SIGNING_ENABLED,
    } as u8;
    let is_311 = conn.dialect == neg::DIALECT_311;
    let (final_reply, session_flags) = loop {
        let mut msg = Msg::new(command::SESSION_SETUP);
        wire::write_session_setup_request(&mut msg.buf, security_mode, 0, 0, &token)?;
        conn.sent_log = Some(Vec::new());
        let reply = conn.call(msg)?;
        for m in conn.sent_log.take().unwrap_or_default() {
            if is_311 {
                preauth.update(&m);
            }
        }
        conn.session_id = reply.header.session_id;
        match reply.status() {
            status::MORE_PROCESSING_REQUIRED => {
                if is_311 {
                    preauth.update(&reply.msg);
                }
                let r = SessionSetupReply::parse(&reply.msg)?;
                match init.step(r.security_buffer).map_err(auth_err)? {
                    InitiatorStep::Send(t) => token = t,
                    InitiatorStep::Done => {
                        return Err(Error::Protocol(
                            "server wants more after NTLM finished".into(),
                        ))
                    }
                }
            }
            status::SUCCESS => {
                let r = SessionSetupReply::parse(&reply.msg)?;
                init.step(r.security_buffer).map_err(auth_err)?;
                let flags = r.session_flags;
                break (reply, flags);
            }
            _ => {
                return Err(reply
                    .check("(authentication)")
                    .err()
                    .unwrap_or_else(|| Error::Protocol("session setup failed".into())))
            }
        }
    };
    let anonymous = session_flags
        & (copyless_proto::messages::SESSION_FLAG_IS_GUEST
            | copyless_proto::messages::SESSION_FLAG_IS_NULL)
        != 0;
    let session_key = init
        .session_key()
        .ok_or_else(|| Error::Protocol("NTLM gave no session key".into()))?;
    let key = signing_key(
        conn.dialect,
        negotiated.signing_algorithm,
        &session_key,
        preauth.value(),
    );
    if final_reply.header.is_signed() && !key.verify(&final_reply.msg) {
        return Err(Error::Protocol(
            "the server's SESSION_SETUP reply has a bad signature (wrong session key?)".into(),
        ));
    }
    let must_sign = opts.signing == Signing::Required
        || negotiated.server_security_mode & neg::SIGNING_REQUIRED != 0;
    if !anonymous {
        conn.signer = Some(key);
        conn.sign_all = must_sign;
    }
    let server_wants_encryption = session_flags & SESSION_FLAG_ENCRYPT_DATA != 0;
    if opts.encrypt || server_wants_encryption {
        let cipher = cipher
            .filter(|_| {
                negotiated.server_caps & neg::CAP_ENCRYPTION != 0
                    || conn.dialect == neg::DIALECT_311
            })
            .ok_or_else(|| {
                Error::Protocol("the server offers no encryption for this session".into())
            })?;
        conn.crypt = Some(Crypt::new(
            conn.dialect,
            cipher,
            &session_key,
            preauth.value(),
            conn.session_id,
            random()?,
        )?);
    }
    Ok(())
}

/// Share flag: the server wants this tree's traffic encrypted.
const SHAREFLAG_ENCRYPT_DATA: u32 = 0x0000_8000;

fn tree_connect(conn: &mut Connection, opts: &ClientOptions) -> Result<(), Error> {
    let host = opts
        .address
        .rsplit_once(':')
        .map_or(opts.address.as_str(), |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let path = format!("\\\\{host}\\{}", opts.share);
    let mut msg = Msg::new(command::TREE_CONNECT);
    wire::write_tree_connect_request(&mut msg.buf, &path)?;
    let reply = conn.call(msg)?.check(&path)?;
    let t = TreeConnectReply::parse(&reply.msg)?;
    if t.share_type != copyless_proto::messages::SHARE_TYPE_DISK {
        return Err(Error::Protocol(format!("{path} is not a disk share")));
    }
    if t.share_flags & SHAREFLAG_ENCRYPT_DATA != 0 && conn.crypt.is_none() {
        return Err(Error::Protocol(format!(
            "{path} requires encryption: use --encrypt"
        )));
    }
    conn.tree_id = reply.header.tree_id;
    Ok(())
}
