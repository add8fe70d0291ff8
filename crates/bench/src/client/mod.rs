//! A small SMB 2/3 client made for load: one TCP connection, one session,
//! one tree, and many requests in flight. Requests are submitted while
//! credits allow; replies are matched by MessageId. All I/O is
//! non-blocking on one thread so that sending never waits for the server to
//! be read from.

mod frame;
pub mod ops;
mod security;
mod setup;

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::net::TcpStream;
use std::time::Duration;

use copyless_crypto::SigningKey;
use copyless_proto::header::{FLAG_RELATED_OPERATIONS, FLAG_SIGNED};
use copyless_proto::{command, status, Header, Writer, HEADER_LEN};
use rustix::event::{poll, PollFd, PollFlags, Timespec};

use frame::{FrameReader, FrameWriter, ReadOutcome};
pub use setup::{connect, ClientOptions, Signing};

/// How long to wait for the server before giving up.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Credits asked for in every request: enough for deep queues of large
/// I/O; servers grant what they will.
const CREDITS_WANTED: u16 = 512;

/// What went wrong talking to the server.
#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    Malformed(copyless_proto::Error),
    /// The server answered with an error status.
    Status {
        command: u16,
        status: u32,
        what: String,
    },
    Protocol(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Malformed(e) => write!(f, "reply from the server: {e}"),
            Error::Status {
                command: cmd,
                status,
                what,
            } => write!(
                f,
                "{} {what} failed: status {status:#010x}{}",
                command::name(*cmd),
                status_name(*status)
            ),
            Error::Protocol(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<copyless_proto::Error> for Error {
    fn from(e: copyless_proto::Error) -> Self {
        Error::Malformed(e)
    }
}

fn status_name(s: u32) -> &'static str {
    match s {
        status::ACCESS_DENIED => " (ACCESS_DENIED)",
        status::LOGON_FAILURE => " (LOGON_FAILURE)",
        status::OBJECT_NAME_NOT_FOUND => " (OBJECT_NAME_NOT_FOUND)",
        status::OBJECT_NAME_COLLISION => " (OBJECT_NAME_COLLISION)",
        status::OBJECT_PATH_NOT_FOUND => " (OBJECT_PATH_NOT_FOUND)",
        status::BAD_NETWORK_NAME => " (BAD_NETWORK_NAME)",
        status::INVALID_PARAMETER => " (INVALID_PARAMETER)",
        status::NOT_SUPPORTED => " (NOT_SUPPORTED)",
        status::SHARING_VIOLATION => " (SHARING_VIOLATION)",
        status::END_OF_FILE => " (END_OF_FILE)",
        status::DISK_FULL => " (DISK_FULL)",
        status::USER_SESSION_DELETED => " (USER_SESSION_DELETED)",
        _ => "",
    }
}

/// One request to send: the 64-byte header (filled in at submission) and
/// the body, built by the functions of [`ops`].
pub struct Msg {
    pub command: u16,
    /// The message from the header on; the header bytes are placeholders.
    pub buf: Writer,
    /// Bytes the reply may carry (READ length, QUERY output size), for the
    /// credit charge.
    pub reply_size: u32,
    /// Bytes of data the request carries (WRITE), for the credit charge.
    pub payload: u32,
}

impl Msg {
    pub fn new(command: u16) -> Msg {
        let mut buf = Writer::with_capacity(128);
        buf.zeros(HEADER_LEN);
        Msg {
            command,
            buf,
            reply_size: 0,
            payload: 0,
        }
    }
}

/// One final reply.
pub struct Reply {
    pub header: Header,
    /// The whole message from its header on.
    pub msg: Vec<u8>,
}

impl Reply {
    pub fn status(&self) -> u32 {
        self.header.status
    }

    pub fn mid(&self) -> u64 {
        self.header.message_id
    }

    /// Turns an error status into an [`Error`], naming what was attempted.
    pub fn check(self, what: &str) -> Result<Reply, Error> {
        if self.header.status == status::SUCCESS {
            Ok(self)
        } else {
            Err(Error::Status {
                command: self.header.command,
                status: self.header.status,
                what: what.to_string(),
            })
        }
    }
}

/// A connected, authenticated client with one tree connected.
pub struct Connection {
    stream: TcpStream,
    reader: FrameReader,
    writer: FrameWriter,
    replies: VecDeque<Reply>,
    pub(crate) dialect: u16,
    pub(crate) max_read: u32,
    pub(crate) max_write: u32,
    pub(crate) max_transact: u32,
    large_mtu: bool,
    session_id: u64,
    tree_id: u32,
    /// The session's signing key (None before authentication and for
    /// anonymous sessions).
    signer: Option<SigningKey>,
    /// Sign every request (Session.SigningRequired).
    sign_all: bool,
    crypt: Option<security::Crypt>,
    next_mid: u64,
    credits: u32,
    in_flight: usize,
    requests_sent: u64,
    /// While set, a copy of every message sent (for the preauth hash).
    sent_log: Option<Vec<Vec<u8>>>,
}

impl Connection {
    fn new(stream: TcpStream) -> Connection {
        Connection {
            stream,
            reader: FrameReader::default(),
            writer: FrameWriter::default(),
            replies: VecDeque::new(),
            dialect: 0,
            max_read: 65536,
            max_write: 65536,
            max_transact: 65536,
            large_mtu: false,
            session_id: 0,
            tree_id: 0,
            signer: None,
            sign_all: false,
            crypt: None,
            next_mid: 0,
            credits: 1,
            in_flight: 0,
            requests_sent: 0,
            sent_log: None,
        }
    }

    pub fn dialect(&self) -> u16 {
        self.dialect
    }

    pub fn max_read(&self) -> u32 {
        self.max_read
    }

    pub fn max_write(&self) -> u32 {
        self.max_write
    }

    pub fn is_signing(&self) -> bool {
        self.sign_all && self.signer.is_some() && self.crypt.is_none()
    }

    pub fn is_encrypting(&self) -> bool {
        self.crypt.is_some()
    }

    /// SMB2 messages sent so far (each part of a compound counts).
    pub fn requests_sent(&self) -> u64 {
        self.requests_sent
    }

    /// Requests sent whose final replies have not been taken yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn charge(&self, msg: &Msg) -> u16 {
        self.charge_for(msg.payload.max(msg.reply_size) as usize)
    }

    /// CreditCharge of a request moving `payload` bytes either way
    /// (MS-SMB2 3.1.5.2): one per 64 KiB started.
    fn charge_for(&self, payload: usize) -> u16 {
        if !self.large_mtu {
            return if self.dialect >= copyless_proto::negotiate::DIALECT_210 {
                1
            } else {
                0
            };
        }
        let units = payload.saturating_sub(1) / 65536 + 1;
        u16::try_from(units).unwrap_or(u16::MAX)
    }

    /// True if a request moving `payload` bytes could be sent now without
    /// waiting for credits.
    pub fn has_credits_for(&self, payload: usize) -> bool {
        self.credits >= u32::from(self.charge_for(payload).max(1))
    }

    /// Sends one request, or several as one compound (the second and later
    /// marked related, sharing the first's file handle). Waits for credits
    /// if needed. Returns the MessageIds.
    pub fn submit(&mut self, msgs: Vec<Msg>) -> Result<Vec<u64>, Error> {
        let need: u32 = msgs.iter().map(|m| u32::from(self.charge(m).max(1))).sum();
        while self.credits < need {
            if self.in_flight == 0 {
                return Err(Error::Protocol(format!(
                    "out of credits: have {}, need {need}",
                    self.credits
                )));
            }
            self.pump(true)?;
        }
        let count = msgs.len();
        let mut mids = Vec::with_capacity(count);
        let prefix = if self.crypt.is_some() {
            4 + copyless_proto::transform::TRANSFORM_HEADER_LEN
        } else {
            4
        };
        let total: usize = msgs.iter().map(|m| m.buf.len() + 7).sum();
        let mut frame = Vec::with_capacity(prefix + total);
        frame.resize(prefix, 0);
        for (i, mut msg) in msgs.into_iter().enumerate() {
            let charge = self.charge(&msg);
            let last = i + 1 == count;
            if !last {
                msg.buf.align(8);
            }
            let mut flags = 0;
            if i > 0 {
                flags |= FLAG_RELATED_OPERATIONS;
            }
            // A 3.1.1 TREE_CONNECT is signed even in an unsigned session
            // (MS-SMB2 3.2.4.1.1), unless it is encrypted.
            let sign = self.signer.is_some()
                && self.crypt.is_none()
                && (self.sign_all
                    || (msg.command == command::TREE_CONNECT
                        && self.dialect == copyless_proto::negotiate::DIALECT_311));
            if sign {
                flags |= FLAG_SIGNED;
            }
            let header = Header {
                credit_charge: charge,
                status: 0,
                command: msg.command,
                credits: CREDITS_WANTED,
                flags,
                next_command: if last { 0 } else { msg.buf.len() as u32 },
                message_id: self.next_mid,
                async_id: 0,
                process_id: 0xfeff,
                tree_id: self.tree_id,
                session_id: self.session_id,
                signature: [0; 16],
            };
            let mut head = Vec::with_capacity(HEADER_LEN);
            header.write(&mut head);
            msg.buf.buf[..HEADER_LEN].copy_from_slice(&head);
            if sign {
                if let Some(signer) = &self.signer {
                    signer.sign(&mut msg.buf.buf);
                }
            }
            mids.push(self.next_mid);
            self.next_mid += u64::from(charge.max(1));
            self.credits -= u32::from(charge.max(1));
            if let Some(log) = self.sent_log.as_mut() {
                log.push(msg.buf.buf.clone());
            }
            frame.extend_from_slice(&msg.buf.buf);
        }
        if let Some(crypt) = self.crypt.as_mut() {
            crypt.seal(&mut frame)?;
        }
        self.writer.push(frame)?;
        self.in_flight += count;
        self.requests_sent += count as u64;
        // Start sending at once; what does not fit goes out in `pump`.
        self.writer.flush(&mut self.stream)?;
        Ok(mids)
    }

    /// A reply is done with: its buffer may take a later one.
    pub fn recycle(&mut self, reply: Reply) {
        self.reader.recycle(reply.msg);
    }

    /// Takes the next final reply, waiting for one if none has arrived.
    pub fn next_reply(&mut self) -> Result<Reply, Error> {
        loop {
            if let Some(r) = self.replies.pop_front() {
                self.in_flight = self.in_flight.saturating_sub(1);
                return Ok(r);
            }
            if self.in_flight == 0 {
                return Err(Error::Protocol(
                    "waiting for a reply with none pending".into(),
                ));
            }
            self.pump(true)?;
        }
    }

    /// Takes a reply that has already arrived, without waiting (but
    /// reading and writing what the socket allows).
    pub fn try_reply(&mut self) -> Result<Option<Reply>, Error> {
        if self.replies.is_empty() && self.in_flight > 0 {
            self.pump(false)?;
        }
        Ok(self.replies.pop_front().inspect(|_| {
            self.in_flight = self.in_flight.saturating_sub(1);
        }))
    }

    /// Sends one request and waits for its reply (which must be the next
    /// one: call only with nothing else in flight).
    pub fn call(&mut self, msg: Msg) -> Result<Reply, Error> {
        let mid = self.submit(vec![msg])?[0];
        let reply = self.next_reply()?;
        if reply.mid() != mid {
            return Err(Error::Protocol(format!(
                "reply for message {} while waiting for {mid}",
                reply.mid()
            )));
        }
        Ok(reply)
    }

    /// Sends a compound and waits for all its replies, in order.
    pub fn call_compound(&mut self, msgs: Vec<Msg>) -> Result<Vec<Reply>, Error> {
        let mids = self.submit(msgs)?;
        let mut out = Vec::with_capacity(mids.len());
        for mid in mids {
            let reply = self.next_reply()?;
            if reply.mid() != mid {
                return Err(Error::Protocol(format!(
                    "reply for message {} while waiting for {mid}",
                    reply.mid()
                )));
            }
            out.push(reply);
        }
        Ok(out)
    }

    /// Moves bytes both ways; with `wait`, blocks until a final reply has
    /// arrived.
    fn pump(&mut self, wait: bool) -> Result<(), Error> {
        loop {
            let wrote = self.writer.flush(&mut self.stream)?;
            let mut read = false;
            let mut got = false;
            // Frames are taken after every read so the staging buffer
            // always has room.
            let mut eof = false;
            loop {
                match self.reader.read(&mut self.stream)? {
                    ReadOutcome::Progress => {
                        read = true;
                        got |= self.take_frames()?;
                    }
                    ReadOutcome::WouldBlock => break,
                    ReadOutcome::Eof => {
                        eof = true;
                        break;
                    }
                }
            }
            // Replies that arrived before the server hung up still count.
            if got || !wait {
                return Ok(());
            }
            if eof {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )));
            }
            if read || wrote {
                continue;
            }
            let mut flags = PollFlags::IN;
            if !self.writer.is_empty() {
                flags |= PollFlags::OUT;
            }
            let timeout = Timespec {
                tv_sec: IO_TIMEOUT.as_secs() as i64,
                tv_nsec: 0,
            };
            let mut fds = [PollFd::new(&self.stream, flags)];
            let n = match poll(&mut fds, Some(&timeout)) {
                Ok(n) => n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(Error::Io(e.into())),
            };
            if n == 0 {
                return Err(Error::Io(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no reply from the server in {} s", IO_TIMEOUT.as_secs()),
                )));
            }
        }
    }

    /// Decodes every complete frame into replies. True if any final reply
    /// was queued.
    fn take_frames(&mut self) -> Result<bool, Error> {
        let mut any = false;
        while let Some(frame) = self.reader.next_frame()? {
            let frame = match (&self.crypt, frame.first()) {
                (Some(crypt), Some(0xfd)) => crypt.open(frame)?,
                _ => frame,
            };
            any |= self.take_messages(frame)?;
        }
        Ok(any)
    }

    fn take_messages(&mut self, frame: Vec<u8>) -> Result<bool, Error> {
        let header = Header::parse(&frame)?;
        if header.next_command == 0 {
            return self.take_message(header, frame);
        }
        let parts: Vec<Vec<u8>> = copyless_proto::compound::split(&frame)?
            .into_iter()
            .map(<[u8]>::to_vec)
            .collect();
        let mut any = false;
        for part in parts {
            let header = Header::parse(&part)?;
            any |= self.take_message(header, part)?;
        }
        Ok(any)
    }

    fn take_message(&mut self, header: Header, msg: Vec<u8>) -> Result<bool, Error> {
        self.credits = self.credits.saturating_add(u32::from(header.credits));
        if header.is_async() && header.status == status::PENDING {
            // An interim reply: the final one follows under the same id.
            return Ok(false);
        }
        if header.is_signed() && self.crypt.is_none() {
            if let Some(signer) = &self.signer {
                if !signer.verify(&msg) {
                    return Err(Error::Protocol(format!(
                        "bad signature on the {} reply",
                        command::name(header.command)
                    )));
                }
            }
        }
        if header.command == command::OPLOCK_BREAK && header.message_id == u64::MAX {
            // We never ask for oplocks or leases; a break is not a reply.
            return Ok(false);
        }
        self.replies.push_back(Reply { header, msg });
        Ok(true)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_crypto::SigningAlgorithm;
    use copyless_proto::header::{FLAG_ASYNC_COMMAND, FLAG_SERVER_TO_REDIR};
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A connection as after setup, talking to a scripted server.
    fn pair(credits: u32) -> (Connection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        client.set_nonblocking(true).unwrap();
        let mut conn = Connection::new(client);
        conn.dialect = copyless_proto::negotiate::DIALECT_311;
        conn.large_mtu = true;
        conn.credits = credits;
        conn.session_id = 77;
        conn.tree_id = 5;
        (conn, server)
    }

    fn read_frame(s: &mut TcpStream) -> Vec<u8> {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).unwrap();
        let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut buf).unwrap();
        buf
    }

    fn reply(mid: u64, credits: u16, flags: u32, status: u32) -> Vec<u8> {
        let mut v = Vec::new();
        Header {
            command: command::ECHO,
            credits,
            flags: FLAG_SERVER_TO_REDIR | flags,
            message_id: mid,
            status,
            session_id: 77,
            ..Header::default()
        }
        .write(&mut v);
        v.extend_from_slice(&[4, 0, 0, 0]);
        v
    }

    fn send_frame(s: &mut TcpStream, msg: &[u8]) {
        s.write_all(&(msg.len() as u32).to_be_bytes()).unwrap();
        s.write_all(msg).unwrap();
    }

    #[test]
    fn pipelined_replies_are_matched_by_message_id() {
        let (mut conn, mut server) = pair(4);
        let mut mids = Vec::new();
        for _ in 0..4 {
            mids.extend(conn.submit(vec![ops::echo()]).unwrap());
        }
        assert_eq!(mids, vec![0, 1, 2, 3]);
        assert_eq!(conn.in_flight(), 4);
        // Credits are spent; a fifth request must wait.
        assert!(!conn.has_credits_for(0));
        let script = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..4 {
                let f = read_frame(&mut server);
                let h = Header::parse(&f).unwrap();
                assert_eq!(
                    (h.session_id, h.tree_id, h.credits),
                    (77, 5, CREDITS_WANTED)
                );
                seen.push(h.message_id);
            }
            // An interim reply for 0 (grants one credit, completes nothing),
            // then 3 alone, then 2 and 1 as one compound, then the final 0.
            let mut interim = reply(0, 1, FLAG_ASYNC_COMMAND, status::PENDING);
            interim[64..].copy_from_slice(&[9, 0, 0, 0]);
            send_frame(&mut server, &interim);
            send_frame(&mut server, &reply(3, 1, 0, 0));
            let mut first = reply(2, 1, 0, 0);
            first.resize(72, 0);
            first[20..24].copy_from_slice(&72u32.to_le_bytes());
            let mut compound = first;
            compound.extend(reply(1, 1, 0, 0));
            send_frame(&mut server, &compound);
            send_frame(&mut server, &reply(0, 2, 0, 0));
            seen
        });
        let mut got: Vec<u64> = (0..4).map(|_| conn.next_reply().unwrap().mid()).collect();
        assert_eq!(script.join().unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(got, vec![3, 2, 1, 0]);
        got.sort();
        assert_eq!(got, mids);
        assert_eq!(conn.in_flight(), 0);
        // 1 (interim) + 1 + 1 + 1 + 2 credits came back.
        assert_eq!(conn.credits, 6);
        assert_eq!(conn.requests_sent(), 4);
        assert!(conn.next_reply().is_err(), "nothing is pending");
    }

    #[test]
    fn large_requests_charge_one_credit_per_64k() {
        let (mut conn, mut server) = pair(3);
        let data = vec![0u8; 3 * 65536];
        let file = copyless_proto::messages::FileId::default();
        // 192 KiB of payload needs 3 credits and consumes 3 message ids.
        assert!(conn.has_credits_for(data.len()));
        assert!(!conn.has_credits_for(data.len() + 1));
        let mids = conn
            .submit(vec![ops::write(file, 0, &data).unwrap()])
            .unwrap();
        assert_eq!(mids, vec![0]);
        assert_eq!(conn.next_mid, 3);
        assert_eq!(conn.credits, 0);
        let f = read_frame(&mut server);
        assert_eq!(Header::parse(&f).unwrap().credit_charge, 3);
        // A reply that grants nothing: with no credits and nothing in
        // flight, the next submission fails at once instead of hanging.
        send_frame(&mut server, &reply(0, 0, 0, 0));
        assert_eq!(conn.next_reply().unwrap().mid(), 0);
        let err = conn.submit(vec![ops::echo()]).expect_err("no credits");
        assert!(err.to_string().contains("out of credits"), "{err}");
    }

    #[test]
    fn signed_replies_are_verified() {
        let (mut conn, mut server) = pair(2);
        let key = [0x11u8; 16];
        conn.signer = Some(SigningKey::new(SigningAlgorithm::AesCmac, key));
        conn.sign_all = true;
        conn.submit(vec![ops::echo()]).unwrap();
        conn.submit(vec![ops::echo()]).unwrap();
        let server_key = SigningKey::new(SigningAlgorithm::AesCmac, key);
        let request = read_frame(&mut server);
        assert!(Header::parse(&request).unwrap().is_signed());
        assert!(
            server_key.verify(&request),
            "the request is signed with the session key"
        );
        read_frame(&mut server);
        let mut good = reply(0, 1, FLAG_SIGNED, 0);
        server_key.sign(&mut good);
        send_frame(&mut server, &good);
        assert_eq!(conn.next_reply().unwrap().mid(), 0);
        let mut bad = reply(1, 1, FLAG_SIGNED, 0);
        server_key.sign(&mut bad);
        bad[50] ^= 1;
        send_frame(&mut server, &bad);
        let err = conn
            .next_reply()
            .err()
            .expect("a bad signature is an error");
        assert!(err.to_string().contains("bad signature"), "{err}");
    }
}
