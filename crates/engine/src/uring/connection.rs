//! One connection as one task on a worker's ring. The task keeps a
//! receive, a send and every data intent of the connection under way at
//! once, so that receiving, disk I/O and sending of different requests
//! overlap, and all that one turn of the loop starts goes to the kernel
//! with one `io_uring_enter`; small replies are written at once by one
//! plain system call instead (the socket is non-blocking), so that a
//! request answered in place costs one ring entry and one write. It alone
//! drives the protocol core: frames and intent completions go in, replies
//! and intents come out. A frame that
//! may touch file metadata is handled on the blocking pool, never on the
//! ring's thread; meanwhile receives, sends and intents go on, and what
//! the core must see waits for it.

use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::io;
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use compio::buf::{BufResult, IntoInner, IoBuf};
use compio::driver::BufferRef;
use compio::io::{AsyncRead, AsyncReadManaged, AsyncWriteExt};
use compio::net::TcpStream;
use copyless_core::RequestTrace;
use copyless_core::{Connection, Letter, Op, Output, Token};
use copyless_trace::{clock, FrameTimes, Recorder, Request, Scope};
use futures_channel::oneshot;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;

use super::aside::Pipe;
use super::data;
use super::held::{Frame, Held};
use super::Shared;
use crate::env::SystemEnv;
use crate::framing;
use crate::log_limit::RateLimit;
use crate::logons::Logons;
use crate::post::{Arrivals, Inbox, PostOffice, Posted};
use crate::Accepted;

/// A client that takes no bytes of a reply for this long is gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// What one receive takes at most when it starts a frame: several small
/// frames at a time, or the start of a large one. A larger frame gets a
/// buffer of its own, read into directly.
pub(super) const RECV_CHUNK: usize = 64 * 1024;

/// A receive buffer that starts a frame without the pool: an idle
/// connection then holds this much.
const IDLE_RECV: usize = 4 * 1024;

/// Replies of at most this many bytes, together, are written to the
/// socket at once rather than by the ring.
const WRITE_NOW: usize = 64 * 1024;

/// Frames sent with one system call at most.
const SEND_BATCH: usize = 32;

static INTERNAL_ERROR: RateLimit = RateLimit::new(Duration::from_secs(10));

type Local<T> = Pin<Box<dyn Future<Output = T>>>;

/// What the pool hands back: the connection, the core's output (None when
/// it panicked), the frame and the time its VFS calls took.
type Handled = Box<(Connection, Option<Output>, Frame, u64)>;

/// A receive under way.
type Receive = Local<Got>;

/// When a frame's bytes came in, and when it was cut out of them.
#[derive(Clone, Copy)]
struct Arrival {
    /// Where in the connection's byte stream the frame began, for the
    /// letters' marks (post.rs).
    start: u64,
    first_byte: u64,
    received: u64,
    parsed: u64,
}

/// A frame's record while its replies wait for intents.
#[derive(Default)]
struct Pending {
    t: FrameTimes,
    requests: Vec<RequestTrace>,
}

/// A reply to send, with the record of the frame it finishes.
struct Outgoing {
    frame: Option<Vec<u8>>,
    record: Option<Pending>,
    /// Data that follows the frame on the wire from a pipe (a read sent
    /// from aside), and its length.
    tail: Option<(Pipe, usize)>,
}

/// What a receive brought, and into which buffer.
enum Got {
    /// A buffer the kernel took from the ring's pool when the bytes
    /// arrived: between frames a connection holds no receive buffer.
    Pooled(io::Result<Option<BufferRef>>),
    /// The inbox, behind the start of a frame already there.
    Inbox(io::Result<usize>, Vec<u8>),
    /// A large frame's own buffer, to be filled to `big_len`.
    Big(io::Result<usize>, Vec<u8>),
}

/// What the core is handed to run, here or on the pool.
enum Work {
    Frame(Frame),
    Letter(Letter),
    /// The core's timer ([`Connection::handle_timeout`]).
    Timeout,
}

enum Event {
    Letter(Posted),
    Received(Got),
    Sent(bool),
    Done(data::Done),
    Handled(Option<Handled>),
    Timer,
}

pub async fn serve(c: Accepted, shared: Shared) {
    let stream = c.stream.try_clone().and_then(|s| {
        s.set_nodelay(true)?;
        // For reads sent from aside (see `aside`); the ring's own
        // operations do not mind.
        s.set_nonblocking(true)?;
        let local = s.local_addr()?;
        Ok((TcpStream::from_std(s)?, local))
    });
    if let Ok((stream, local)) = stream {
        let conn = Connection::new(shared.server.clone(), c.peer, local);
        let arrivals = Arrivals::new(c.stream.clone());
        if let Ok(inbox) = shared.post.open(conn.id(), false, Some(arrivals.clone())) {
            Driver::new(&c, stream, conn, inbox, arrivals, &shared)
                .run()
                .await;
        }
    }
    let _ = c.stream.shutdown(Shutdown::Both);
    c.finished();
}

struct Driver<'a> {
    c: &'a Accepted,
    stream: TcpStream,
    max_preauth: usize,
    max: usize,
    /// None while the core runs on the pool.
    conn: Option<Connection>,
    env: SystemEnv,
    /// The start of a frame, received and not yet whole (taken while a
    /// receive fills it); empty between frames.
    inbox: Vec<u8>,
    /// Receives between frames take a buffer from the ring's pool; false
    /// when the ring has none.
    pooled: bool,
    /// The pool had no buffer for the last receive: the next one reads
    /// into the inbox instead.
    pool_dry: bool,
    /// A large frame's own buffer while it fills, and its length.
    big: Option<Vec<u8>>,
    big_len: usize,
    /// When the first bytes of the frame being received arrived.
    first_byte: u64,
    held: Held,
    authenticated: bool,
    mail: Inbox,
    post: std::sync::Arc<PostOffice>,
    logons: std::sync::Arc<Logons>,
    /// What the letters' marks count: bytes taken from the socket.
    arrivals: std::sync::Arc<Arrivals>,
    /// Bytes received so far, and where the next frame to be cut out of
    /// them begins.
    received_bytes: u64,
    cut_bytes: u64,
    /// Letters, frames and completions for the core, each in arrival
    /// order.
    letters: VecDeque<Posted>,
    frames: VecDeque<(Frame, Arrival)>,
    dones: VecDeque<data::Done>,
    outq: VecDeque<Outgoing>,
    recv: Option<Receive>,
    send: Option<Local<io::Result<()>>>,
    /// When the send under way must have ended: one timer for the
    /// connection, not one per send.
    send_by: Option<Instant>,
    /// Records of the frames whose replies the send under way carries.
    sending: Vec<Pending>,
    intents: FuturesUnordered<Local<data::Done>>,
    /// How to stop each intent under way, should the client cancel it.
    stops: HashMap<Token, oneshot::Sender<()>>,
    pool: Option<Local<Option<Handled>>>,
    /// The times of the frame on the pool.
    pending_frame: Option<FrameTimes>,
    timer: Option<(Instant, Local<()>)>,
    deadline: Option<Instant>,
    next_tick: Option<Instant>,
    /// No more receiving: the client closed its side, or sent what is not
    /// a frame. What came before is still answered.
    eof: bool,
    /// No more handling either: the core said to close, or the client
    /// takes no more replies. What is queued to send still goes.
    closing: bool,
    recorder: Option<Recorder>,
    scope: Option<Scope>,
    /// Frames whose replies wait, by the token of the intent they wait for.
    waiting: HashMap<Token, Pending>,
    recv_calls: u64,
    send_calls: u64,
}

impl<'a> Driver<'a> {
    fn new(
        c: &'a Accepted,
        stream: TcpStream,
        conn: Connection,
        mail: Inbox,
        arrivals: std::sync::Arc<Arrivals>,
        shared: &Shared,
    ) -> Driver<'a> {
        let recorder = shared.tracer.connection(c.peer.ip());
        let scope = recorder.as_ref().map(Recorder::scope);
        Driver {
            c,
            stream,
            max_preauth: conn.max_message_size(false),
            max: conn.max_message_size(true),
            conn: Some(conn),
            env: SystemEnv,
            inbox: Vec::new(),
            pooled: shared.pooled_receives,
            pool_dry: false,
            big: None,
            big_len: 0,
            first_byte: clock::now(),
            held: Held::default(),
            authenticated: false,
            mail,
            post: shared.post.clone(),
            logons: shared.logons.clone(),
            arrivals,
            received_bytes: 0,
            cut_bytes: 0,
            letters: VecDeque::new(),
            frames: VecDeque::new(),
            dones: VecDeque::new(),
            outq: VecDeque::new(),
            recv: None,
            send: None,
            send_by: None,
            sending: Vec::new(),
            intents: FuturesUnordered::new(),
            stops: HashMap::new(),
            pool: None,
            pending_frame: None,
            timer: None,
            deadline: Some(Instant::now() + shared.limits.get().preauth_timeout),
            next_tick: None,
            eof: false,
            closing: false,
            recorder,
            scope,
            waiting: HashMap::new(),
            recv_calls: 0,
            send_calls: 0,
        }
    }

    /// Whether the connection has nothing left to do.
    fn over(&self) -> bool {
        let answered = self.frames.is_empty() && self.dones.is_empty() && self.intents.is_empty();
        let sent = self.send.is_none() && self.outq.is_empty();
        (self.closing || (self.eof && answered)) && sent && self.pool.is_none()
    }

    async fn run(mut self) {
        loop {
            self.drive_core();
            if self.over() {
                break;
            }
            self.start_io();
            // A last reply written at once leaves no event to wait for.
            if self.over() {
                break;
            }
            let event = self.next_event().await;
            let now = Instant::now();
            if self.deadline.is_some_and(|d| now >= d) {
                // Too slow to authenticate, however busy it kept us.
                break;
            }
            match event {
                Event::Letter(letter) => self.letters.push_back(letter),
                Event::Received(got) => self.received(got),
                Event::Sent(ok) => self.sent(ok),
                Event::Done(done) => {
                    self.stops.remove(&done.token);
                    self.dones.push_back(done);
                }
                Event::Handled(Some(handled)) => {
                    let (conn, out, frame, disk) = *handled;
                    self.pool = None;
                    self.conn = Some(conn);
                    let out = out.unwrap_or_else(|| self.internal_error());
                    let t = self.pending_frame.take().unwrap_or_default();
                    self.frame_done(out, frame, t, disk);
                }
                Event::Handled(None) => {
                    // The pool lost the connection (a panic outside the
                    // core's guard): nothing more can be answered.
                    self.pool = None;
                    break;
                }
                Event::Timer => self.timer_due(now),
            }
        }
        self.finish().await;
    }

    /// Feeds the core what waits for it while it is here: letters first,
    /// once the frames that had begun to arrive when they were posted are
    /// handled (post.rs); then completions (they finish replies), then
    /// frames, until one goes to the pool.
    fn drive_core(&mut self) {
        while self.conn.is_some() && !self.closing {
            if self.letter_due() {
                let Some(Posted { letter, .. }) = self.letters.pop_front() else {
                    break;
                };
                let t = FrameTimes {
                    dispatched: clock::now(),
                    ..FrameTimes::default()
                };
                self.work(Work::Letter(letter), t);
            } else if let Some(done) = self.dones.pop_front() {
                self.completion(done);
            } else if let Some((frame, arrival)) = self.frames.pop_front() {
                self.frame(frame, arrival);
            } else {
                break;
            }
        }
    }

    /// Whether the first letter is for the core now: no frame that began
    /// before its mark waits, nor bytes before it in the socket that a
    /// receive is about to bring.
    fn letter_due(&self) -> bool {
        let Some(first) = self.letters.front() else {
            return false;
        };
        match self.frames.front() {
            Some((_, arrival)) => arrival.start >= first.mark,
            None => first.mark <= self.received_bytes || !self.receiving(),
        }
    }

    /// Whether receives go on.
    fn receiving(&self) -> bool {
        // A channel whose relayed frames wait elsewhere reads no more until
        // they are done (the core is away on the pool: it read on before).
        let wanted = self.conn.as_ref().is_none_or(Connection::wants_frames);
        !self.eof && !self.closing && wanted && self.held.bytes() <= 2 * self.max
    }

    /// Starts a receive and a send when none is under way and there is
    /// reason to, and sets the timer.
    fn start_io(&mut self) {
        if self.recv.is_none() && self.receiving() {
            self.recv = Some(self.receive());
        }
        if self.send.is_none() && !self.outq.is_empty() {
            let mut bufs: Vec<Vec<u8>> = Vec::new();
            let mut tail = None;
            // A frame with a tail ends the batch: the tail goes next.
            while bufs.len() < 2 * SEND_BATCH && tail.is_none() {
                let Some(o) = self.outq.pop_front() else {
                    break;
                };
                if let Some(f) = o.frame {
                    let tail_len = o.tail.as_ref().map_or(0, |(_, n)| *n);
                    // The core never makes a frame its head cannot announce.
                    if let Ok(head) = framing::head(f.len() + tail_len) {
                        bufs.push(head.to_vec());
                        bufs.push(f);
                        tail = o.tail;
                    }
                }
                self.sending.extend(o.record);
            }
            // Small replies of a connection with no data I/O under way fit
            // in the socket's buffer: written at once by one plain system
            // call, they need no ring operation, completion or turn of the
            // loop. While reads and writes are under way the loop enters
            // the ring for them anyway, and replies go with them (at depth
            // 32 a write per reply batch costs more than it saves); so do
            // large replies, and what the socket does not take.
            let small = bufs.iter().map(Vec::len).sum::<usize>() <= WRITE_NOW;
            let alone = self.intents.is_empty();
            let written = (tail.is_none() && small && alone && !bufs.is_empty())
                .then(|| write_now(&self.c.stream, &mut bufs));
            match written {
                Some(Err(_)) => self.sent(false),
                Some(Ok(())) if bufs.is_empty() => self.sent(true),
                None if bufs.is_empty() => self.record_sent(),
                _ => self.send_by_ring(bufs, tail),
            }
        }
        // While the core is on the pool its tick waits: the pool's return
        // is an event of its own.
        let tick = self.next_tick.filter(|_| self.conn.is_some());
        let wake = [self.deadline, tick, self.send_by]
            .into_iter()
            .flatten()
            .min();
        // A timer that fires early is kept (its wake finds nothing due and
        // sets the next): so a send, which moves the wake time later, arms
        // no timer of its own.
        if let Some(at) = wake {
            if self.timer.as_ref().is_none_or(|(t, _)| *t > at) {
                let left = at.saturating_duration_since(Instant::now());
                self.timer = Some((at, Box::pin(compio::time::sleep(left))));
            }
        }
    }

    /// Starts a send of `bufs` by the ring, then of the pipe's data behind
    /// them, if any.
    fn send_by_ring(&mut self, bufs: Vec<Vec<u8>>, tail: Option<(Pipe, usize)>) {
        let mut s = self.stream.clone();
        let socket = self.c.stream.clone();
        self.send_by = Some(Instant::now() + SEND_TIMEOUT);
        self.send = Some(Box::pin(async move {
            let BufResult(r, _) = s.write_vectored_all(bufs).await;
            r?;
            if let Some((pipe, n)) = tail {
                pipe.drain(&socket, n).await?;
                pipe.give_back();
            }
            io::Result::Ok(())
        }));
    }

    /// The receive to start: into a large frame's own buffer while it
    /// fills, behind the start of a frame in the inbox, else into a
    /// buffer from the ring's pool.
    fn receive(&mut self) -> Receive {
        let mut s = self.stream.clone();
        if let Some(big) = self.big.take() {
            let (have, len) = (big.len(), self.big_len);
            return Box::pin(async move {
                let BufResult(r, slice) = s.read(big.slice(have..len)).await;
                Got::Big(r, slice.into_inner())
            });
        }
        if self.inbox.is_empty() && self.pooled && !std::mem::take(&mut self.pool_dry) {
            // An idle connection holds no receive buffer of its own.
            self.inbox = Vec::new();
            return Box::pin(async move { Got::Pooled(s.read_managed(RECV_CHUNK).await) });
        }
        let mut buf = std::mem::take(&mut self.inbox);
        if buf.is_empty() {
            buf = Vec::with_capacity(IDLE_RECV);
        } else {
            buf.reserve(RECV_CHUNK);
        }
        Box::pin(async move {
            // Behind what is already there: a Vec given whole is read into
            // from its start.
            let have = buf.len();
            let BufResult(r, slice) = s.read(buf.slice(have..)).await;
            Got::Inbox(r, slice.into_inner())
        })
    }

    async fn next_event(&mut self) -> Event {
        let Driver {
            mail,
            recv,
            send,
            intents,
            pool,
            timer,
            ..
        } = self;
        poll_fn(|cx| {
            // First: a letter posted before a frame arrived is handled
            // before it.
            if let Poll::Ready(Some(letter)) = mail.poll_letter(cx) {
                return Poll::Ready(Event::Letter(letter));
            }
            // A send that ended before a frame arrived is seen first: the
            // frame then finds nothing of this connection on its way out.
            if let Some(f) = send.as_mut() {
                if let Poll::Ready(r) = f.as_mut().poll(cx) {
                    *send = None;
                    return Poll::Ready(Event::Sent(r.is_ok()));
                }
            }
            if let Some(f) = recv.as_mut() {
                if let Poll::Ready(got) = f.as_mut().poll(cx) {
                    *recv = None;
                    return Poll::Ready(Event::Received(got));
                }
            }
            if let Poll::Ready(Some(done)) = intents.poll_next_unpin(cx) {
                return Poll::Ready(Event::Done(done));
            }
            if let Some(f) = pool.as_mut() {
                if let Poll::Ready(handled) = f.as_mut().poll(cx) {
                    return Poll::Ready(Event::Handled(handled));
                }
            }
            if let Some((_, f)) = timer.as_mut() {
                if f.as_mut().poll(cx).is_ready() {
                    *timer = None;
                    return Poll::Ready(Event::Timer);
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Takes back a receive's buffer and frames what arrived.
    fn received(&mut self, got: Got) {
        self.recv_calls += 1;
        let n = match &got {
            Got::Pooled(Ok(Some(bytes))) => bytes.len(),
            Got::Big(Ok(n), _) | Got::Inbox(Ok(n), _) => *n,
            _ => 0,
        };
        self.arrivals.took(n);
        self.received_bytes += n as u64;
        match got {
            Got::Pooled(Ok(Some(bytes))) if !bytes.is_empty() => {
                // The inbox was empty: these bytes start a frame.
                self.first_byte = clock::now();
                let used = self.cut_frames(&bytes);
                if !self.eof {
                    self.inbox.extend_from_slice(&bytes[used..]);
                }
            }
            Got::Pooled(Err(e)) if e.kind() == io::ErrorKind::ResourceBusy => {
                // ENOBUFS: more connections received at once than the pool
                // has buffers. Nothing was read; the next receive brings
                // its own buffer.
                self.pool_dry = true;
            }
            Got::Big(Ok(n), buf) if n > 0 => {
                if buf.len() < self.big_len {
                    self.big = Some(buf);
                } else {
                    self.push_frame(buf, clock::now());
                }
            }
            Got::Inbox(Ok(n), buf) if n > 0 => {
                if buf.len() == n {
                    // The inbox was empty: these bytes start a frame.
                    self.first_byte = clock::now();
                }
                let used = self.cut_frames(&buf);
                self.inbox = buf;
                self.inbox.drain(..used);
            }
            // The client closed, or the socket failed.
            _ => self.eof = true,
        }
    }

    /// Copies each whole frame out of `bytes`, and says how many bytes it
    /// took; a large frame that is not whole yet moves to a buffer of its
    /// own, filled by the next receives.
    fn cut_frames(&mut self, bytes: &[u8]) -> usize {
        let mut used = 0;
        let limit = if self.authenticated {
            self.max
        } else {
            self.max_preauth
        };
        while let Some(&head) = bytes.get(used..used + 4).and_then(|h| h.first_chunk()) {
            let Ok(len) = framing::announced(head, limit) else {
                self.eof = true;
                break;
            };
            let body = used + 4..used + 4 + len;
            if body.end <= bytes.len() {
                // Receiving ends when the frame is in a buffer of its own.
                self.push_frame(bytes[body.clone()].to_vec(), clock::now());
                used = body.end;
                continue;
            }
            if len > RECV_CHUNK / 2 {
                let mut big = Vec::with_capacity(len);
                big.extend_from_slice(&bytes[used + 4..]);
                self.big = Some(big);
                self.big_len = len;
                used = bytes.len();
            }
            break;
        }
        used
    }

    fn push_frame(&mut self, frame: Vec<u8>, received: u64) {
        let start = self.cut_bytes;
        self.cut_bytes += 4 + frame.len() as u64;
        let arrival = Arrival {
            start,
            first_byte: self.first_byte,
            received,
            parsed: clock::now(),
        };
        self.frames
            .push_back((Frame::new(frame, &self.held), arrival));
    }

    fn frame(&mut self, frame: Frame, arrival: Arrival) {
        let t = FrameTimes {
            first_byte: arrival.first_byte,
            received: arrival.received,
            parsed: arrival.parsed,
            dispatched: clock::now(),
            bytes_in: frame.len() as u64 + 4,
            ..FrameTimes::default()
        };
        self.work(Work::Frame(frame), t);
    }

    /// Runs the core on a frame or a letter: here when it can only lead
    /// to data intents and replies, else on the blocking pool.
    fn work(&mut self, work: Work, t: FrameTimes) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let scope = self.scope.clone();
        let may_block = match &work {
            Work::Frame(frame) => conn.may_block(frame),
            Work::Letter(letter) => letter.may_block(),
            Work::Timeout => conn.timeout_may_block(),
        };
        if !may_block {
            let (out, frame, disk) = run_core(&mut conn, work, scope.as_ref());
            self.conn = Some(conn);
            let out = out.unwrap_or_else(|| self.internal_error());
            self.frame_done(out, frame, t, disk);
            return;
        }
        self.pending_frame = Some(t);
        let job = compio::runtime::spawn_blocking(move || {
            let (out, frame, disk) = run_core(&mut conn, work, scope.as_ref());
            Box::new((conn, out, frame, disk))
        });
        self.pool = Some(Box::pin(async move { job.await.ok() }));
    }

    fn frame_done(&mut self, out: Output, frame: Frame, mut t: FrameTimes, disk: u64) {
        t.handled = clock::now();
        t.disk_ns = disk;
        self.dispatch(
            out,
            Rc::new(frame),
            Pending {
                t,
                requests: Vec::new(),
            },
        );
    }

    fn completion(&mut self, done: data::Done) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let env = &mut self.env;
        let out = catch_unwind(AssertUnwindSafe(|| {
            conn.complete(done.token, done.completion, env)
        }))
        .ok();
        let mut out = out.unwrap_or_else(|| self.internal_error());
        // The reply carries the pipe's data, or the pipe goes with what
        // it holds.
        let tail = match (out.aside, done.aside) {
            (Some(n), Some(pipe)) => Some((pipe, n)),
            (Some(_), None) => {
                out = self.internal_error();
                None
            }
            (None, _) => None,
        };
        let mut pending = self.waiting.remove(&done.token).unwrap_or_default();
        pending.t.disk_ns += done.ns;
        pending.t.handled = clock::now();
        self.dispatch_with_tail(out, Rc::new(Frame::empty()), pending, tail);
    }

    /// Queues the replies, starts the intents, and notes what tracing
    /// records once the replies are sent.
    fn dispatch(&mut self, out: Output, frame: Rc<Frame>, pending: Pending) {
        self.dispatch_with_tail(out, frame, pending, None);
    }

    /// As [`Driver::dispatch`], with data from a pipe to send behind the
    /// output's last frame.
    fn dispatch_with_tail(
        &mut self,
        mut out: Output,
        frame: Rc<Frame>,
        mut pending: Pending,
        mut tail: Option<(Pipe, usize)>,
    ) {
        // Before the replies go: a client acting on them finds the
        // letters delivered.
        self.post.send(std::mem::take(&mut out.messages));
        self.logons.report(std::mem::take(&mut out.events));
        pending.requests.append(&mut out.requests);
        pending.t.bytes_out += out.frames.iter().map(|f| f.len() as u64 + 4).sum::<u64>();
        pending.t.bytes_out += tail.as_ref().map_or(0, |(_, n)| *n as u64);
        let mut record = None;
        if self.recorder.is_some() {
            match out.intents.first() {
                Some(i) => {
                    self.waiting.insert(i.token, pending);
                }
                None if !pending.requests.is_empty() || pending.t.bytes_out > 0 => {
                    record = Some(pending);
                }
                None => {}
            }
        }
        if out.frames.is_empty() {
            if record.is_some() {
                self.outq.push_back(Outgoing {
                    frame: None,
                    record,
                    tail: None,
                });
            }
        } else {
            let last = out.frames.len() - 1;
            for (i, f) in out.frames.into_iter().enumerate() {
                self.outq.push_back(Outgoing {
                    frame: Some(f),
                    record: if i == last { record.take() } else { None },
                    tail: if i == last { tail.take() } else { None },
                });
            }
        }
        for token in &out.cancel {
            if let Some(stop) = self.stops.remove(token) {
                let _ = stop.send(());
            }
        }
        for mut intent in out.intents {
            // A read sent from aside holds up the replies behind it while
            // a kernel thread splices it into the socket: worth it only
            // when nothing else of this connection waits to go.
            let alone = self.intents.is_empty() && self.outq.is_empty() && self.send.is_none();
            if let Op::Read { bare, .. } = &mut intent.op {
                *bare &= alone;
            }
            let intent = match data::at_once(intent, &frame, self.scope.as_ref()) {
                Ok(done) => {
                    self.dones.push_back(done);
                    continue;
                }
                Err(intent) => intent,
            };
            let (stop, stopped) = oneshot::channel();
            self.stops.insert(intent.token, stop);
            self.intents.push(Box::pin(data::perform(
                intent,
                frame.clone(),
                self.scope.clone(),
                stopped,
            )));
        }
        if out.disconnect {
            self.closing = true;
        }
        let now = Instant::now();
        if let Some(conn) = self.conn.as_ref() {
            if self.deadline.is_some() && conn.has_valid_session() {
                self.deadline = None;
                self.authenticated = true;
                self.c.authenticated();
            }
            if let Some(t) = conn.timeout() {
                let at = now + t;
                self.next_tick = Some(self.next_tick.map_or(at, |n| n.min(at)));
            }
        }
    }

    fn sent(&mut self, ok: bool) {
        self.send_calls += 1;
        self.send_by = None;
        if !ok {
            // The client takes no more: nothing else can reach it.
            self.closing = true;
            self.outq.clear();
        }
        self.record_sent();
    }

    /// Records the frames whose replies have gone out.
    fn record_sent(&mut self) {
        let Some(recorder) = self.recorder.as_mut() else {
            self.sending.clear();
            return;
        };
        let sent = clock::now();
        for mut p in self.sending.drain(..) {
            p.t.sent = sent;
            p.t.recv_calls = std::mem::take(&mut self.recv_calls);
            p.t.send_calls = std::mem::take(&mut self.send_calls);
            recorder.frame(
                &p.t,
                p.requests.iter().map(|r| Request {
                    command: r.command,
                    message_id: r.message_id,
                    status: r.status,
                    share: r.share,
                    user: r.user.as_deref(),
                }),
            );
        }
    }

    fn timer_due(&mut self, now: Instant) {
        if self.send_by.is_some_and(|by| now >= by) {
            // A client that takes no bytes of a reply for this long is
            // gone: the send is dropped, which cancels it.
            self.send = None;
            self.sent(false);
        }
        if self.next_tick.is_none_or(|t| now < t) {
            return;
        }
        let Some(conn) = self.conn.as_ref() else {
            // On the pool: the tick waits for it.
            return;
        };
        self.next_tick = conn.timeout().map(|t| now + t);
        let t = FrameTimes {
            dispatched: clock::now(),
            ..FrameTimes::default()
        };
        // Here, unless it may close files or run held requests again.
        self.work(Work::Timeout, t);
    }

    fn internal_error(&self) -> Output {
        INTERNAL_ERROR.log(|| {
            format!(
                "connection from {}: internal error, connection closed",
                self.c.peer
            )
        });
        Output {
            disconnect: true,
            ..Output::default()
        }
    }

    /// The connection is over: intents under way finish (a write is never
    /// cut short), then the core closes the opens, on the pool (closing may
    /// remove files).
    async fn finish(mut self) {
        self.recv = None;
        let intents = std::mem::take(&mut self.intents);
        let _ = compio::time::timeout(SEND_TIMEOUT, intents.collect::<Vec<_>>()).await;
        if let Some(mut pool) = self.pool.take() {
            if let Ok(Some(handled)) = compio::time::timeout(SEND_TIMEOUT, &mut pool).await {
                self.conn = Some(handled.0);
            }
        }
        if let Some(mut conn) = self.conn.take() {
            let closed = compio::runtime::spawn_blocking(move || {
                let letters =
                    catch_unwind(AssertUnwindSafe(|| conn.shutdown())).unwrap_or_default();
                drop(conn);
                crate::memory::connection_gone();
                letters
            });
            // Lock requests its locks held up, on other connections, are
            // woken.
            if let Ok(letters) = closed.await {
                self.post.send(letters);
            }
        }
    }
}

/// Writes what it can of `bufs` to the (non-blocking) socket without
/// waiting, and leaves in `bufs` what is left to send.
pub(super) fn write_now(socket: &std::net::TcpStream, bufs: &mut Vec<Vec<u8>>) -> io::Result<()> {
    let mut done = 0;
    let mut partial = 0;
    while done < bufs.len() {
        let slices: Vec<io::IoSlice<'_>> = std::iter::once(&bufs[done][partial..])
            .chain(bufs[done + 1..].iter().map(Vec::as_slice))
            .map(io::IoSlice::new)
            .collect();
        let mut n = match io::Write::write_vectored(&mut &*socket, &slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while n > 0 {
            let left = bufs[done].len() - partial;
            if n >= left {
                n -= left;
                done += 1;
                partial = 0;
            } else {
                partial += n;
                n = 0;
            }
        }
    }
    bufs.drain(..done);
    if let Some(first) = bufs.first_mut() {
        first.drain(..partial);
    }
    Ok(())
}

/// Runs the core on a frame or a letter, its VFS calls counted for the
/// connection: the output (None when the core panicked), the frame the
/// output's intents may point into, and the time the VFS calls took.
fn run_core(
    conn: &mut Connection,
    work: Work,
    scope: Option<&Scope>,
) -> (Option<Output>, Frame, u64) {
    let go = || {
        let mut frame = Frame::empty();
        let out = catch_unwind(AssertUnwindSafe(|| match work {
            Work::Frame(f) => {
                frame = f;
                conn.handle_in_place(&mut frame, &mut SystemEnv)
            }
            Work::Letter(letter) => conn.receive(letter, &mut SystemEnv),
            Work::Timeout => conn.handle_timeout(&mut SystemEnv),
        }))
        .ok();
        (out, frame)
    };
    let ((out, frame), disk) = match scope {
        Some(scope) => scope.run(go),
        None => (go(), 0),
    };
    (out, frame, disk)
}
