//! One connection on a ring's loop, driven by its loop's calls:
//! completions, letters, the pool's results and timers come in as calls;
//! receives, sends and data operations go out to the ring through `Ops`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use copyless_core::{Completion, Connection, Letter, Op, Output, Token, Unsealed, WriteData};
use copyless_trace::{clock, FrameTimes, Recorder, Request, Scope};
use copyless_vfs::posix::data_error;

use super::aside::{self, Pipe};
use super::data::{self, Done};
use super::held::{Frame, Held};
use super::ops::{Fd, Kept, Key, Ops};
use super::pool::{Pool, Results};
use super::room;
use super::worker::Tag;
use crate::env::{LoopEnv, SystemEnv};
use crate::framing;
use crate::logons::Logons;
use crate::post::{Arrivals, Inbox, PostOffice, Posted};
use crate::Accepted;

const SEND_TIMEOUT: Duration = Duration::from_secs(60);
const RECV_CHUNK: usize = 64 * 1024;
const IDLE_RECV: usize = 4 * 1024;
const WRITE_NOW: usize = 64 * 1024;
const SEND_BATCH: usize = 32;

/// Where a frame began in the connection's byte stream (for the letters'
/// marks, post.rs), and when its bytes came in.
#[derive(Clone, Copy)]
struct Arrival {
    start: u64,
    first_byte: u64,
    received: u64,
    parsed: u64,
}

/// What a receive fills.
#[derive(Clone, Copy)]
enum Into {
    Pool,
    Inbox,
    /// A large frame's own buffer, of the frame's length.
    Big(usize),
}

/// What a completion on the ring is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum What {
    Recv,
    Send,
    /// A data intent's read or write, by its token.
    Data(Token),
    /// A data intent's fdatasync, after its write.
    Sync(Token),
    /// Room in the socket for more of a read sent from aside.
    Drain,
    Cancel,
}

/// What the pool hands back.
pub(super) enum Back {
    Handled(Box<(Connection, Option<Output>, Frame, u64)>),
    /// An intent carried out: its token, result, and the time it took.
    Done(Token, Completion, u64),
    /// A call made, likewise.
    Called(Token, Completion, u64),
    Closed(Vec<copyless_core::Message>),
}

enum Work {
    /// A frame as [`Connection::unseal`] left it: a sealed one is opened
    /// once, on the loop, and judged by what it holds.
    Frame(Frame, Unsealed),
    Letter(Letter),
    Timeout,
}

#[derive(Default)]
struct Pending {
    t: FrameTimes,
    requests: Vec<copyless_core::RequestTrace>,
}

struct Outgoing {
    frame: Option<Vec<u8>>,
    record: Option<Pending>,
    /// Data that follows the frame on the wire from a pipe (a read sent
    /// from aside), and its length.
    tail: Option<(Pipe, usize)>,
}

/// A data intent under way on the ring.
struct Flight {
    key: Key,
    file: copyless_core::DataFile,
    /// What the completion finishes: a read appends behind `start`, a
    /// write goes on from `done`.
    kind: FlightKind,
    start: u64,
}

enum FlightKind {
    /// The next read starts at `offset` of the file; the data lands in
    /// the buffer from `start`, up to `end`.
    Read {
        offset: u64,
        start: usize,
        end: usize,
    },
    Write {
        offset: u64,
        data: Rc<dyn AsRef<[u8]>>,
        range: std::ops::Range<usize>,
        done: usize,
        sync: bool,
    },
    Sync,
    /// A read sent from aside: spliced from the file into `pipe`, `done`
    /// bytes of `len` so far; `buf` holds the reply's head.
    Aside {
        pipe: Pipe,
        buf: Vec<u8>,
        offset: u64,
        len: usize,
        done: usize,
    },
}

/// What a loop's connections share: its ring, the pool, and where the
/// pool's results for them come back.
pub(super) struct Ctx {
    pub ops: Ops<Tag>,
    pub pool: Arc<Pool>,
    pub results: Arc<Results<Back>>,
}

pub(super) struct Conn {
    pub slot: usize,
    c: Accepted,
    fd: Fd,
    max_preauth: usize,
    max: usize,
    conn: Option<Connection>,
    /// The start of a frame, received and not yet whole; empty between
    /// frames.
    inbox: Vec<u8>,
    /// A large frame's own buffer, holding what has arrived of it, and
    /// the frame's length.
    big: Option<(Vec<u8>, usize)>,
    pool_dry: bool,
    first_byte: u64,
    held: Held,
    authenticated: bool,
    mail: Inbox,
    /// Rings the loop's bell for this connection when a letter comes.
    waker: std::task::Waker,
    post: Arc<PostOffice>,
    logons: Arc<Logons>,
    arrivals: Arc<Arrivals>,
    letters: VecDeque<Posted>,
    frames: VecDeque<(Frame, Arrival)>,
    dones: VecDeque<Done>,
    outq: VecDeque<Outgoing>,
    /// The receive under way, and what it fills.
    recv: Option<(Key, Into)>,
    /// The send under way, and how much of its first buffer had gone
    /// before it.
    send: Option<(Key, usize)>,
    send_by: Option<Instant>,
    /// A pipe's data to send once the send under way has gone, and how
    /// much of it is left.
    tail: Option<(Pipe, usize)>,
    sending: Vec<Pending>,
    flights: HashMap<Token, Flight>,
    /// Intents the pool carries out (data only the VFS reaches).
    on_pool: usize,
    /// Reads and flushes on the pool, which a cancel ends at once (the
    /// pool's result then goes unheard): what each completes with then.
    stoppable: HashMap<Token, Completion>,
    handling: bool,
    pending_frame: Option<FrameTimes>,
    deadline: Option<Instant>,
    next_tick: Option<Instant>,
    eof: bool,
    closing: bool,
    shut: bool,
    recorder: Option<Recorder>,
    scope: Option<Scope>,
    waiting: HashMap<Token, Pending>,
    received_bytes: u64,
    cut_bytes: u64,
    /// Receives and sends since the last frame was recorded (tracing).
    recv_calls: u64,
    send_calls: u64,
}

impl Conn {
    pub fn new(
        slot: usize,
        c: Accepted,
        shared: &super::worker::Shared,
        waker: std::task::Waker,
    ) -> io::Result<Conn> {
        let s = c.stream.clone();
        s.set_nodelay(true)?;
        s.set_nonblocking(true)?;
        let local = s.local_addr()?;
        let conn = Connection::new(shared.server.clone(), c.peer, local);
        let arrivals = Arrivals::new(c.stream.clone());
        let mail = shared.post.open(conn.id(), false, Some(arrivals.clone()))?;
        let recorder = shared.tracer.connection(c.peer.ip());
        let scope = recorder.as_ref().map(Recorder::scope);
        Ok(Conn {
            slot,
            fd: s,
            max_preauth: conn.max_message_size(false),
            max: conn.max_message_size(true),
            conn: Some(conn),
            inbox: Vec::new(),
            big: None,
            pool_dry: false,
            first_byte: clock::now(),
            held: Held::default(),
            authenticated: false,
            mail,
            waker,
            post: shared.post.clone(),
            logons: shared.logons.clone(),
            arrivals,
            letters: VecDeque::new(),
            frames: VecDeque::new(),
            dones: VecDeque::new(),
            outq: VecDeque::new(),
            recv: None,
            send: None,
            send_by: None,
            tail: None,
            sending: Vec::new(),
            flights: HashMap::new(),
            on_pool: 0,
            stoppable: HashMap::new(),
            handling: false,
            pending_frame: None,
            deadline: Some(Instant::now() + shared.limits.get().preauth_timeout),
            next_tick: None,
            eof: false,
            closing: false,
            shut: false,
            recorder,
            scope,
            waiting: HashMap::new(),
            received_bytes: 0,
            cut_bytes: 0,
            recv_calls: 0,
            send_calls: 0,
            c,
        })
    }

    /// When the loop must call [`Conn::timer`] next.
    pub fn wake_at(&self) -> Option<Instant> {
        let tick = self.next_tick.filter(|_| self.conn.is_some());
        [self.deadline, tick, self.send_by]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the connection has nothing left to do: the loop then
    /// closes it once `under_way` is zero.
    pub fn over(&self) -> bool {
        let answered = self.frames.is_empty() && self.dones.is_empty() && self.flights.is_empty();
        let sent = self.send.is_none() && self.outq.is_empty() && self.tail.is_none();
        (self.closing || (self.eof && answered)) && sent && !self.handling && self.on_pool == 0
    }

    /// Operations of this connection the ring still runs.
    pub fn under_way(&self) -> bool {
        self.recv.is_some() || self.send.is_some() || !self.flights.is_empty()
    }

    /// Takes what has arrived for the core and starts what is to go out:
    /// the loop calls it after each event of the connection.
    pub fn step(&mut self, ctx: &mut Ctx) {
        self.take_letters();
        self.drive_core(ctx);
        self.start_io(ctx);
    }

    fn take_letters(&mut self) {
        let mut cx = Context::from_waker(&self.waker);
        while let Poll::Ready(Some(letter)) = self.mail.poll_letter(&mut cx) {
            self.letters.push_back(letter);
        }
    }

    fn drive_core(&mut self, ctx: &mut Ctx) {
        while !self.closing {
            let Some(conn) = self.conn.as_ref() else {
                break;
            };
            if self.letter_due() {
                let Some(Posted { letter, .. }) = self.letters.pop_front() else {
                    break;
                };
                let t = FrameTimes {
                    dispatched: clock::now(),
                    ..FrameTimes::default()
                };
                self.work(ctx, Work::Letter(letter), t);
            } else if let Some(done) = self.dones.pop_front() {
                self.completion(ctx, done);
            } else if let Some((mut frame, arrival)) = self.frames.pop_front() {
                let how = conn.unseal(&mut frame);
                let t = FrameTimes {
                    first_byte: arrival.first_byte,
                    received: arrival.received,
                    parsed: arrival.parsed,
                    dispatched: clock::now(),
                    bytes_in: frame.len() as u64 + 4,
                    ..FrameTimes::default()
                };
                self.work(ctx, Work::Frame(frame, how), t);
            } else {
                break;
            }
        }
    }

    fn letter_due(&self) -> bool {
        let Some(first) = self.letters.front() else {
            return false;
        };
        match self.frames.front() {
            Some((_, arrival)) => arrival.start >= first.mark,
            None => first.mark <= self.received_bytes || !self.receiving(),
        }
    }

    fn receiving(&self) -> bool {
        let wanted = self.conn.as_ref().is_none_or(Connection::wants_frames);
        !self.eof && !self.closing && wanted && self.held.bytes() <= 2 * self.max
    }

    fn work(&mut self, ctx: &mut Ctx, work: Work, t: FrameTimes) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let scope = self.scope.clone();
        let may_block = match &work {
            Work::Frame(frame, how) => conn.unsealed_may_block(frame, *how),
            Work::Letter(letter) => letter.may_block(),
            Work::Timeout => conn.timeout_may_block(),
        };
        if !may_block {
            let (out, frame, disk) = run_core(&mut conn, work, scope.as_ref(), &mut LoopEnv);
            self.conn = Some(conn);
            let out = out.unwrap_or_else(|| self.internal_error());
            self.frame_done(ctx, out, frame, t, disk);
            return;
        }
        self.pending_frame = Some(t);
        self.handling = true;
        ctx.pool.run(&ctx.results, self.slot, move || {
            let (out, frame, disk) = run_core(&mut conn, work, scope.as_ref(), &mut SystemEnv);
            Back::Handled(Box::new((conn, out, frame, disk)))
        });
    }

    /// The pool's result for this connection.
    pub fn back(&mut self, ctx: &mut Ctx, back: Back) {
        match back {
            Back::Handled(h) => {
                let (conn, out, frame, disk) = *h;
                self.handling = false;
                self.conn = Some(conn);
                let out = out.unwrap_or_else(|| self.internal_error());
                let t = self.pending_frame.take().unwrap_or_default();
                self.frame_done(ctx, out, frame, t, disk);
            }
            Back::Done(token, completion, ns) => {
                self.on_pool -= 1;
                let stopped = completion.stoppable() && self.stoppable.remove(&token).is_none();
                if stopped {
                    // Cancelled, and answered so already.
                    return;
                }
                self.dones.push_back(Done {
                    token,
                    completion,
                    ns,
                    aside: None,
                });
            }
            Back::Called(token, completion, ns) => {
                self.on_pool -= 1;
                self.dones.push_back(Done {
                    token,
                    completion,
                    ns,
                    aside: None,
                });
            }
            Back::Closed(letters) => {
                self.handling = false;
                self.post.send(letters);
                self.shut = true;
            }
        }
    }

    fn frame_done(
        &mut self,
        ctx: &mut Ctx,
        out: Output,
        frame: Frame,
        mut t: FrameTimes,
        disk: u64,
    ) {
        t.handled = clock::now();
        t.disk_ns = disk;
        self.dispatch(
            ctx,
            out,
            Rc::new(frame),
            Pending {
                t,
                requests: Vec::new(),
            },
            None,
        );
    }

    fn completion(&mut self, ctx: &mut Ctx, done: Done) {
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let out = catch_unwind(AssertUnwindSafe(|| {
            conn.complete(done.token, done.completion, &mut LoopEnv)
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
        self.dispatch(ctx, out, Rc::new(Frame::empty()), pending, tail);
    }

    /// Queues the replies (the last followed on the wire by `tail`'s
    /// data, if any), starts the intents, and notes what tracing records
    /// once the replies are sent.
    fn dispatch(
        &mut self,
        ctx: &mut Ctx,
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
            let first = out.intents.first().map(|i| i.token);
            match first.or_else(|| out.calls.first().map(|c| c.token)) {
                Some(token) => {
                    self.waiting.insert(token, pending);
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
            if let Some(stopped) = self.stoppable.remove(token) {
                self.dones.push_back(Done {
                    token: *token,
                    completion: stopped,
                    ns: 0,
                    aside: None,
                });
                continue;
            }
            if let Some(f) = self.flights.get(token) {
                if matches!(f.kind, FlightKind::Sync) {
                    let _ = ctx.ops.cancel(f.key, Tag::Conn(self.slot, What::Cancel));
                }
            }
        }
        for mut intent in out.intents {
            // A read sent from aside holds up the replies behind it while
            // its data goes into the socket: worth it only when nothing
            // else of this connection waits to go.
            let alone = self.flights.is_empty() && self.outq.is_empty() && self.send.is_none();
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
            self.start_intent(ctx, intent, &frame);
        }
        for call in out.calls {
            self.start_call(ctx, call);
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

    /// A filesystem call goes to the pool: the one call, while the loop
    /// goes on serving this connection's other requests (and their calls)
    /// and the others', so that a call that waits for a slow disk holds
    /// up only its own request.
    fn start_call(&mut self, ctx: &mut Ctx, call: copyless_core::Call) {
        if data::call_at_once(&call) {
            let start = clock::now();
            let (token, completion) = match &self.scope {
                Some(s) => s.run(|| call.perform()).0,
                None => call.perform(),
            };
            self.dones.push_back(Done {
                token,
                completion,
                ns: clock::nanos(start, clock::now()),
                aside: None,
            });
            return;
        }
        let scope = self.scope.clone();
        let start = clock::now();
        self.on_pool += 1;
        ctx.pool.run(&ctx.results, self.slot, move || {
            let (token, completion) = match scope {
                Some(s) => s.run(|| call.perform()).0,
                None => call.perform(),
            };
            Back::Called(token, completion, clock::nanos(start, clock::now()))
        });
    }

    fn start_intent(&mut self, ctx: &mut Ctx, intent: copyless_core::Intent, frame: &Rc<Frame>) {
        let token = intent.token;
        if intent.file.data_fd().is_none() {
            // Only the VFS reaches this data: the pool does it, with the
            // bytes to write copied out of the frame.
            let scope = self.scope.clone();
            let copyless_core::Intent { token, file, op } = intent;
            let op = match op {
                Op::Write { offset, data, sync } => Op::Write {
                    offset,
                    data: WriteData::Owned(data.bytes(frame).to_vec()),
                    sync,
                },
                op => op,
            };
            // A read or write the pool may have begun runs to its end
            // (Completion::stoppable).
            if let Op::Flush = &op {
                let stopped = Completion::Flush(Err(copyless_vfs::VfsError::Cancelled));
                self.stoppable.insert(token, stopped);
            }
            let intent = copyless_core::Intent { token, file, op };
            let start = clock::now();
            self.on_pool += 1;
            ctx.pool.run(&ctx.results, self.slot, move || {
                let (token, completion) = match scope {
                    Some(s) => s.run(|| intent.perform(&[])).0,
                    None => intent.perform(&[]),
                };
                Back::Done(token, completion, clock::nanos(start, clock::now()))
            });
            return;
        }
        let fd = RawHandle::of(&intent.file);
        let start = clock::now();
        let file = intent.file.clone();
        let r = match intent.op {
            Op::Read {
                offset,
                len,
                buf,
                bare: true,
            } if aside::fits(offset, len) => match Pipe::take() {
                Some(pipe) => ctx
                    .ops
                    .splice_in(
                        fd,
                        offset,
                        pipe.write.clone(),
                        len,
                        Tag::Conn(self.slot, What::Data(token)),
                    )
                    .map(|key| Flight {
                        key,
                        file,
                        kind: FlightKind::Aside {
                            pipe,
                            buf,
                            offset,
                            len,
                            done: 0,
                        },
                        start,
                    }),
                None => self.read_by_ring(ctx, token, fd, file, offset, len, buf),
            },
            Op::Read {
                offset, len, buf, ..
            } => self.read_by_ring(ctx, token, fd, file, offset, len, buf),
            Op::Write { offset, data, sync } => {
                let (bytes, range): (Rc<dyn AsRef<[u8]>>, _) = match data {
                    WriteData::Frame(r) => (frame.clone(), r),
                    WriteData::Owned(v) => {
                        let n = v.len();
                        (Rc::new(v), 0..n)
                    }
                };
                ctx.ops
                    .write_shared(
                        fd,
                        offset,
                        bytes.clone(),
                        range.clone(),
                        Tag::Conn(self.slot, What::Data(token)),
                    )
                    .map(|key| Flight {
                        key,
                        file,
                        kind: FlightKind::Write {
                            offset,
                            data: bytes,
                            range,
                            done: 0,
                            sync,
                        },
                        start,
                    })
            }
            Op::Flush => ctx
                .ops
                .fdatasync(fd, Tag::Conn(self.slot, What::Sync(token)))
                .map(|key| Flight {
                    key,
                    file,
                    kind: FlightKind::Sync,
                    start,
                }),
        };
        match r {
            Ok(f) => {
                self.flights.insert(token, f);
            }
            Err(e) => self.dones.push_back(Done {
                token,
                completion: Completion::Flush(Err(data_error(e))),
                ns: 0,
                aside: None,
            }),
        }
    }

    /// Starts reading `len` bytes at `offset` of `file` into `buf`,
    /// behind what it holds.
    #[allow(clippy::too_many_arguments)]
    fn read_by_ring(
        &self,
        ctx: &mut Ctx,
        token: Token,
        fd: Fd,
        file: copyless_core::DataFile,
        offset: u64,
        len: usize,
        buf: Vec<u8>,
    ) -> io::Result<Flight> {
        let from = buf.len();
        let key = ctx.ops.read_at(
            fd,
            offset,
            buf,
            len,
            Tag::Conn(self.slot, What::Data(token)),
        )?;
        Ok(Flight {
            key,
            file,
            kind: FlightKind::Read {
                offset,
                start: from,
                end: from + len,
            },
            start: clock::now(),
        })
    }

    /// A data operation of intent `token` completed.
    pub fn data_done(&mut self, ctx: &mut Ctx, token: Token, result: i32, kept: Kept, sync: bool) {
        let Some(mut f) = self.flights.remove(&token) else {
            return;
        };
        let fd = || RawHandle::of(&f.file);
        if matches!(f.kind, FlightKind::Aside { .. }) {
            self.aside_done(ctx, token, f, result);
            return;
        }
        if sync {
            let r = if result < 0 {
                Err(ring_error(result))
            } else {
                Ok(())
            };
            let completion = match f.kind {
                FlightKind::Sync => Completion::Flush(r),
                _ => Completion::Write(r),
            };
            let done = self.finished(token, &f, completion, None);
            self.dones.push_back(done);
            return;
        }
        match &mut f.kind {
            FlightKind::Read { offset, start, end } => {
                let Kept::Filling(buf) = kept else {
                    return;
                };
                if result < 0 {
                    let e = ring_error(result);
                    let done = self.finished(token, &f, Completion::Read(buf, Err(e)), None);
                    self.dones.push_back(done);
                    return;
                }
                let n = result as usize;
                if n > 0 && buf.len() < *end {
                    // Short of the end of file: read on from there.
                    *offset += n as u64;
                    let rest = *end - buf.len();
                    let started = ctx.ops.read_at(
                        fd(),
                        *offset,
                        buf,
                        rest,
                        Tag::Conn(self.slot, What::Data(token)),
                    );
                    self.go_on(token, f, started, |e| Completion::Read(Vec::new(), Err(e)));
                    return;
                }
                let moved = Some((false, buf.len() - *start));
                let done = self.finished(token, &f, Completion::Read(buf, Ok(())), moved);
                self.dones.push_back(done);
            }
            FlightKind::Write {
                offset,
                data,
                range,
                done,
                sync,
            } => {
                if result <= 0 {
                    let e = if result == 0 {
                        io::ErrorKind::WriteZero.into()
                    } else {
                        io::Error::from_raw_os_error(-result)
                    };
                    let d = self.finished(token, &f, Completion::Write(Err(data_error(e))), None);
                    self.dones.push_back(d);
                    return;
                }
                *done += result as usize;
                if *done < range.len() {
                    let at = *offset + *done as u64;
                    let rest = range.start + *done..range.end;
                    let started = ctx.ops.write_shared(
                        fd(),
                        at,
                        data.clone(),
                        rest,
                        Tag::Conn(self.slot, What::Data(token)),
                    );
                    self.go_on(token, f, started, |e| Completion::Write(Err(e)));
                    return;
                }
                if *sync && !f.file.vfs.data_in_memory() {
                    let started = ctx
                        .ops
                        .fdatasync(fd(), Tag::Conn(self.slot, What::Sync(token)));
                    self.go_on(token, f, started, |e| Completion::Write(Err(e)));
                    return;
                }
                let n = range.len();
                let d = self.finished(token, &f, Completion::Write(Ok(())), Some((true, n)));
                self.dones.push_back(d);
            }
            FlightKind::Sync | FlightKind::Aside { .. } => {}
        }
    }

    /// The intent `token`'s completion, its time, and the bytes it moved
    /// counted for tracing.
    fn finished(
        &self,
        token: Token,
        f: &Flight,
        completion: Completion,
        moved: Option<(bool, usize)>,
    ) -> Done {
        let ns = clock::nanos(f.start, clock::now());
        if let (Some(scope), Some((write, n))) = (&self.scope, moved) {
            scope.run(|| f.file.vfs.data_done(write, n as u64, ns));
        }
        Done {
            token,
            completion,
            ns,
            aside: None,
        }
    }

    /// Keeps flight `f` under way on the operation just `started`, or,
    /// when it could not start, answers the intent with `failed`.
    fn go_on(
        &mut self,
        token: Token,
        mut f: Flight,
        started: io::Result<Key>,
        failed: impl FnOnce(copyless_vfs::VfsError) -> Completion,
    ) {
        match started {
            Ok(key) => {
                f.key = key;
                self.flights.insert(token, f);
            }
            Err(e) => {
                let d = self.finished(token, &f, failed(data_error(e)), None);
                self.dones.push_back(d);
            }
        }
    }

    /// A splice of a read sent from aside completed.
    fn aside_done(&mut self, ctx: &mut Ctx, token: Token, f: Flight, result: i32) {
        let Flight {
            file, kind, start, ..
        } = f;
        let FlightKind::Aside {
            pipe,
            buf,
            offset,
            len,
            mut done,
        } = kind
        else {
            return;
        };
        let fd = RawHandle::of(&file);
        let finish = |completion, aside, moved| {
            let ns = clock::nanos(start, clock::now());
            if let (Some(scope), true) = (&self.scope, moved > 0) {
                scope.run(|| file.vfs.data_done(false, moved as u64, ns));
            }
            Done {
                token,
                completion,
                ns,
                aside,
            }
        };
        if result == -libc::EAGAIN {
            // A full pipe, which a read that fits never meets: the read
            // is copied instead, and what the pipe holds goes with it.
            drop(pipe);
            match self.read_by_ring(ctx, token, fd, file.clone(), offset, len, buf) {
                Ok(mut f) => {
                    f.start = start;
                    self.flights.insert(token, f);
                }
                Err(e) => {
                    let d = finish(Completion::Read(Vec::new(), Err(data_error(e))), None, 0);
                    self.dones.push_back(d);
                }
            }
            return;
        }
        if result < 0 {
            let e = ring_error(result);
            let d = finish(Completion::ReadAside(buf, Err(e)), None, 0);
            self.dones.push_back(d);
            return;
        }
        done += result as usize;
        if result > 0 && done < len {
            let tag = Tag::Conn(self.slot, What::Data(token));
            let at = offset + done as u64;
            match ctx
                .ops
                .splice_in(fd, at, pipe.write.clone(), len - done, tag)
            {
                Ok(key) => {
                    let kind = FlightKind::Aside {
                        pipe,
                        buf,
                        offset,
                        len,
                        done,
                    };
                    let f = Flight {
                        key,
                        file: file.clone(),
                        kind,
                        start,
                    };
                    self.flights.insert(token, f);
                }
                Err(e) => {
                    let d = finish(Completion::ReadAside(buf, Err(data_error(e))), None, 0);
                    self.dones.push_back(d);
                }
            }
            return;
        }
        let d = if done == 0 {
            pipe.give_back();
            finish(Completion::ReadAside(buf, Ok(0)), None, 0)
        } else {
            finish(Completion::ReadAside(buf, Ok(done)), Some(pipe), done)
        };
        self.dones.push_back(d);
    }

    fn start_io(&mut self, ctx: &mut Ctx) {
        if self.recv.is_none() && self.receiving() {
            self.start_recv(ctx);
        }
        if self.send.is_none() && !self.outq.is_empty() {
            let mut bufs: Vec<Vec<u8>> = Vec::new();
            while bufs.len() < 2 * SEND_BATCH {
                let Some(o) = self.outq.pop_front() else {
                    break;
                };
                self.sending.extend(o.record);
                let Some(f) = o.frame else {
                    continue;
                };
                // The frame's length counts the pipe's data behind it.
                let tail_len = o.tail.as_ref().map_or(0, |(_, n)| *n);
                if let Ok(head) = framing::head(f.len() + tail_len) {
                    bufs.push(head.to_vec());
                    bufs.push(f);
                    if o.tail.is_some() {
                        // The pipe's data goes right behind its reply.
                        self.tail = o.tail;
                        break;
                    }
                }
            }
            let small = bufs.iter().map(Vec::len).sum::<usize>() <= WRITE_NOW;
            let alone = self.flights.is_empty();
            let written =
                (small && alone && !bufs.is_empty()).then(|| write_now(&self.c.stream, &mut bufs));
            match written {
                Some(Err(_)) => self.sent(false),
                Some(Ok(())) if bufs.is_empty() => self.drain(ctx),
                None if bufs.is_empty() => self.record_sent(),
                _ => self.send_by_ring(ctx, bufs, 0),
            }
        }
    }

    fn send_by_ring(&mut self, ctx: &mut Ctx, bufs: Vec<Vec<u8>>, skip: usize) {
        if self.send_by.is_none() {
            self.send_by = Some(Instant::now() + SEND_TIMEOUT);
        }
        match ctx.ops.send(
            self.fd.clone(),
            bufs,
            skip,
            Tag::Conn(self.slot, What::Send),
        ) {
            Ok(key) => self.send = Some((key, skip)),
            Err(_) => self.sent(false),
        }
    }

    /// A send by the ring completed.
    pub fn send_done(&mut self, ctx: &mut Ctx, result: i32, kept: Kept) {
        let gone = self.send.take().map_or(0, |(_, skip)| skip);
        let Kept::Vectored(mut bufs, ..) = kept else {
            return;
        };
        if result <= 0 {
            self.send_by = None;
            self.sent(false);
            return;
        }
        // What went: whole buffers, then part of one; the first had lost
        // `gone` bytes to earlier sends.
        let mut n = result as usize + gone;
        let mut skip = 0;
        let mut whole = 0;
        for b in &bufs {
            if n >= b.len() {
                n -= b.len();
                whole += 1;
            } else {
                skip = n;
                break;
            }
        }
        bufs.drain(..whole).for_each(room::give_back);
        if bufs.is_empty() {
            self.drain(ctx);
        } else {
            self.send_by_ring(ctx, bufs, skip);
        }
    }

    /// Sends the data of the pipe behind the replies just sent, if any,
    /// as far as the socket takes it; the ring then says when it has
    /// room for more ([`Conn::drain_ready`]).
    fn drain(&mut self, ctx: &mut Ctx) {
        let Some((pipe, left)) = self.tail.as_mut() else {
            self.sent(true);
            return;
        };
        while *left > 0 {
            match pipe.drain(&*self.c.stream, *left) {
                Ok(Some(n)) => *left -= n,
                Ok(None) => {
                    if self.send_by.is_none() {
                        self.send_by = Some(Instant::now() + SEND_TIMEOUT);
                    }
                    let tag = Tag::Conn(self.slot, What::Drain);
                    match ctx.ops.poll_writable(self.fd.clone(), tag) {
                        Ok(key) => self.send = Some((key, 0)),
                        Err(_) => {
                            // What the pipe holds goes with it.
                            self.tail = None;
                            self.sent(false);
                        }
                    }
                    return;
                }
                Err(_) => {
                    self.tail = None;
                    self.sent(false);
                    return;
                }
            }
        }
        if let Some((pipe, _)) = self.tail.take() {
            pipe.give_back();
        }
        self.sent(true);
    }

    /// The socket has room for more of the pipe's data, or has failed.
    pub fn drain_ready(&mut self, ctx: &mut Ctx, result: i32) {
        self.send = None;
        if result < 0 {
            self.tail = None;
            self.sent(false);
        } else {
            self.drain(ctx);
        }
    }

    fn start_recv(&mut self, ctx: &mut Ctx) {
        let tag = Tag::Conn(self.slot, What::Recv);
        if let Some((big, len)) = self.big.take() {
            let rest = len - big.len();
            self.recv = ctx
                .ops
                .recv_all(self.fd.clone(), big, rest, tag)
                .ok()
                .map(|k| (k, Into::Big(len)));
            return;
        }
        let pooled = ctx.ops.recv_pool().is_some();
        if self.inbox.is_empty() && pooled && !std::mem::take(&mut self.pool_dry) {
            // An idle connection holds no receive buffer of its own.
            self.inbox = Vec::new();
            self.recv = ctx
                .ops
                .recv_pooled(self.fd.clone(), tag)
                .ok()
                .map(|k| (k, Into::Pool));
            return;
        }
        let buf = std::mem::take(&mut self.inbox);
        let room = if buf.is_empty() {
            IDLE_RECV
        } else {
            RECV_CHUNK
        };
        self.recv = ctx
            .ops
            .recv(self.fd.clone(), buf, room, tag)
            .ok()
            .map(|k| (k, Into::Inbox));
    }

    /// A receive completed: `buffer` names the pool's buffer it filled.
    pub fn recv_done(&mut self, ctx: &mut Ctx, result: i32, kept: Kept, buffer: Option<u16>) {
        let Some((_, into)) = self.recv.take() else {
            return;
        };
        self.recv_calls += 1;
        if result == -libc::ENOBUFS {
            // More connections received at once than the pool has
            // buffers: the next receive brings its own.
            self.pool_dry = true;
            return;
        }
        if result <= 0 {
            // The client closed, or the socket failed.
            self.eof = true;
            return;
        }
        let n = result as usize;
        self.arrivals.took(n);
        self.received_bytes += n as u64;
        match (into, kept, buffer) {
            (Into::Pool, _, Some(bid)) => {
                let Some(pool) = ctx.ops.recv_pool() else {
                    self.eof = true;
                    return;
                };
                let bytes = pool.bytes(bid, n);
                // The inbox was empty: these bytes start a frame.
                self.first_byte = clock::now();
                let used = self.cut_frames(bytes);
                if !self.eof {
                    self.inbox.extend_from_slice(&bytes[used..]);
                }
                pool.give_back(bid);
            }
            (Into::Big(len), Kept::Filling(buf), _) => {
                if buf.len() < len {
                    self.big = Some((buf, len));
                } else {
                    self.push_frame(buf);
                }
            }
            (Into::Inbox, Kept::Filling(mut buf), _) => {
                if buf.len() == n {
                    self.first_byte = clock::now();
                }
                let used = self.cut_frames(&buf);
                buf.drain(..used);
                self.inbox = buf;
            }
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
                self.push_frame(bytes[body.clone()].to_vec());
                used = body.end;
                continue;
            }
            if len > RECV_CHUNK / 2 {
                let part = &bytes[used + 4..];
                let mut big = Vec::with_capacity(len);
                big.extend_from_slice(part);
                self.big = Some((big, len));
                used = bytes.len();
            }
            break;
        }
        used
    }

    fn push_frame(&mut self, frame: Vec<u8>) {
        let start = self.cut_bytes;
        self.cut_bytes += 4 + frame.len() as u64;
        let received = clock::now();
        let arrival = Arrival {
            start,
            first_byte: self.first_byte,
            received,
            parsed: clock::now(),
        };
        self.frames
            .push_back((Frame::new(frame, &self.held), arrival));
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

    /// The time [`Conn::wake_at`] named has come (or passed).
    pub fn timer(&mut self, ctx: &mut Ctx, now: Instant) {
        if self.deadline.is_some_and(|d| now >= d) {
            // Too slow to authenticate.
            self.closing = true;
            self.outq.clear();
            return;
        }
        if self.send_by.is_some_and(|by| now >= by) {
            // A client that takes no bytes of a reply for this long is
            // gone; the send under way is cut short with the socket.
            let _ = self.c.stream.shutdown(Shutdown::Both);
            self.send_by = None;
            self.closing = true;
            self.outq.clear();
        }
        if self.next_tick.is_none_or(|t| now < t) {
            return;
        }
        let Some(conn) = self.conn.as_ref() else {
            return;
        };
        self.next_tick = conn.timeout().map(|t| now + t);
        let t = FrameTimes {
            dispatched: clock::now(),
            ..FrameTimes::default()
        };
        self.work(ctx, Work::Timeout, t);
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

    /// The connection is over and nothing of it is under way: the core
    /// closes its opens on the pool (closing may remove files); the
    /// loop drops the connection when [`Conn::shut`] says so.
    pub fn close(&mut self, ctx: &mut Ctx) {
        let _ = self.c.stream.shutdown(Shutdown::Both);
        let Some(mut conn) = self.conn.take() else {
            self.shut = true;
            return;
        };
        self.handling = true;
        ctx.pool.run(&ctx.results, self.slot, move || {
            let letters = catch_unwind(AssertUnwindSafe(|| conn.shutdown())).unwrap_or_default();
            drop(conn);
            crate::memory::connection_gone();
            Back::Closed(letters)
        });
    }

    /// Over, with nothing under way: time for [`Conn::close`].
    pub fn ready_to_close(&self) -> bool {
        self.over() && !self.under_way() && self.conn.is_some()
    }

    /// Stops the receive under way of a connection that is over.
    pub fn stop_receiving(&mut self, ctx: &mut Ctx) {
        if let Some((key, _)) = self.recv {
            if self.over() {
                let _ = ctx.ops.cancel(key, Tag::Cancel);
            }
        }
    }

    /// Closed: the loop may drop it.
    pub fn shut(&self) -> bool {
        self.shut
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.c.finished();
    }
}

static INTERNAL_ERROR: crate::log_limit::RateLimit =
    crate::log_limit::RateLimit::new(Duration::from_secs(10));

/// The error a ring operation completed with (a negated errno): one the
/// connection's cancel stopped answers as cancelled.
fn ring_error(result: i32) -> copyless_vfs::VfsError {
    if result == -libc::ECANCELED {
        copyless_vfs::VfsError::Cancelled
    } else {
        data_error(io::Error::from_raw_os_error(-result))
    }
}

/// A file's descriptor, kept open by the handle it belongs to.
struct RawHandle {
    fd: std::os::fd::RawFd,
    _open: copyless_core::DataFile,
}

impl RawHandle {
    fn of(file: &copyless_core::DataFile) -> Fd {
        Arc::new(RawHandle {
            fd: raw_fd(file),
            _open: file.clone(),
        })
    }
}

impl std::os::fd::AsRawFd for RawHandle {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd
    }
}

/// The descriptor of a handle whose data has one (checked when its
/// intent was started), else -1, which the kernel refuses.
fn raw_fd(file: &copyless_core::DataFile) -> std::os::fd::RawFd {
    file.data_fd()
        .map_or(-1, |fd| std::os::fd::AsRawFd::as_raw_fd(&fd))
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

fn run_core(
    conn: &mut Connection,
    work: Work,
    scope: Option<&Scope>,
    env: &mut dyn copyless_core::Env,
) -> (Option<Output>, Frame, u64) {
    let go = || {
        let mut frame = Frame::empty();
        let out = catch_unwind(AssertUnwindSafe(|| match work {
            Work::Frame(f, how) => {
                frame = f;
                conn.handle_unsealed(&mut frame, how, env)
            }
            Work::Letter(letter) => conn.receive(letter, env),
            Work::Timeout => conn.handle_timeout(env),
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
