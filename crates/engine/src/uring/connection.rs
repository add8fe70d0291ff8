//! One connection as a task on a worker's ring. Three parts run at once,
//! so that receiving, disk I/O and sending of different requests overlap:
//! a reader that frames what arrives, a writer that sends replies in
//! order (several per system call when they queue up), and this task,
//! which alone drives the protocol core: frames and intent completions go
//! in, replies and intents come out. A frame that may touch file metadata
//! is handled on the blocking pool, never on the ring's thread.

use std::cell::Cell;
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::time::{Duration, Instant};

use compio::buf::{BufResult, IoBuf};
use compio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use compio::net::TcpStream;
use std::collections::HashMap;

use copyless_core::connection::RequestTrace;
use copyless_core::{Connection, Output, Token};
use copyless_trace::{clock, FrameTimes, Recorder, Request, Scope};
use futures_channel::{mpsc, oneshot};
use futures_util::{SinkExt, StreamExt};

use super::data;
use super::held::{Frame, Held};
use super::Shared;
use crate::env::SystemEnv;
use crate::log_limit::RateLimit;
use crate::Accepted;

/// A client that takes no bytes of a reply for this long is gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// Frames received but not yet handled: the reader waits beyond this.
const FRAME_QUEUE: usize = 16;

/// The receive buffer small frames are read into, several at a time; a
/// larger frame gets a buffer of its own, read into directly.
const RECV_CHUNK: usize = 64 * 1024;

/// What an idle connection's receive buffer keeps: a receive is always
/// waiting, so this is memory every idle connection holds.
const IDLE_RECV: usize = 4 * 1024;

/// Frames sent with one system call at most.
const SEND_BATCH: usize = 32;

static INTERNAL_ERROR: RateLimit = RateLimit::new(Duration::from_secs(10));

enum Event {
    Frame(Frame, Arrival),
    /// The client closed the connection, or sent what is not a frame.
    Closed,
    Done(data::Done),
}

/// When a frame's bytes came in, and when it was cut out of them.
#[derive(Clone, Copy)]
struct Arrival {
    first_byte: u64,
    received: u64,
    parsed: u64,
}

/// System calls made for the connection since tracing last looked.
#[derive(Default)]
struct Calls {
    recv: Cell<u64>,
    send: Cell<u64>,
}

pub async fn serve(c: Accepted, shared: Shared) {
    let stream = c.stream.try_clone().and_then(|s| {
        s.set_nodelay(true)?;
        let local = s.local_addr()?;
        Ok((TcpStream::from_std(s)?, local))
    });
    if let Ok((stream, local)) = stream {
        let conn = Connection::new(shared.server.clone(), c.peer, local);
        run(&c, stream, conn, &shared).await;
    }
    let _ = c.stream.shutdown(Shutdown::Both);
    c.finished();
}

async fn run(c: &Accepted, stream: TcpStream, conn: Connection, shared: &Shared) {
    let limits = &shared.limits;
    let authenticated = Rc::new(Cell::new(false));
    let calls = Rc::new(Calls::default());
    let recorder = shared.tracer.connection(c.peer.ip());
    let scope = recorder.as_ref().map(Recorder::scope);
    // Frames whose replies wait for intents, by the token of the intent
    // they wait for: each frame is recorded once, when its replies are
    // sent.
    let mut waiting: Option<HashMap<Token, Pending>> = recorder.as_ref().map(|_| HashMap::new());
    let (frames_tx, frames_rx) = mpsc::channel(FRAME_QUEUE);
    let (done_tx, done_rx) = mpsc::unbounded();
    let (send_tx, send_rx) = mpsc::unbounded::<Outgoing>();
    let reader = compio::runtime::spawn(read_frames(
        stream.clone(),
        frames_tx,
        limits.max_preauth_message_size,
        limits.max_message_size,
        authenticated.clone(),
        calls.clone(),
    ));
    let writer = compio::runtime::spawn(write_frames(stream, send_rx, calls, recorder));
    let mut events = futures_util::stream::select(frames_rx, done_rx);
    let mut conn = Some(conn);
    let mut deadline = Some(Instant::now() + limits.preauth_timeout);
    let mut next_tick: Option<Instant> = None;
    let mut env = SystemEnv;
    // How to stop each intent under way, should the client cancel it.
    let mut running: HashMap<Token, oneshot::Sender<()>> = HashMap::new();
    loop {
        let wake = match (deadline, next_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let event = match wake {
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                compio::time::timeout(left, events.next()).await.ok()
            }
            None => Some(events.next().await),
        };
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            // Too slow to authenticate, however busy it kept us.
            break;
        }
        let (mut out, frame, mut pending) = match event {
            // The timer.
            None => {
                let Some(conn) = conn.as_mut() else { break };
                if next_tick.is_none_or(|t| now < t) {
                    continue;
                }
                next_tick = conn.timeout().map(|t| now + t);
                let out = conn.handle_timeout(&mut env);
                (out, Rc::new(Frame::empty()), Pending::default())
            }
            Some(None | Some(Event::Closed)) => break,
            Some(Some(Event::Frame(frame, arrival))) => {
                let dispatched = clock::now();
                let bytes_in = frame.len() as u64 + 4;
                let (out, frame, disk_ns) = handle(&mut conn, frame, scope.clone()).await;
                let t = FrameTimes {
                    first_byte: arrival.first_byte,
                    received: arrival.received,
                    parsed: arrival.parsed,
                    dispatched,
                    handled: clock::now(),
                    bytes_in,
                    disk_ns,
                    ..FrameTimes::default()
                };
                (
                    out,
                    frame,
                    Pending {
                        t,
                        requests: Vec::new(),
                    },
                )
            }
            Some(Some(Event::Done(done))) => {
                running.remove(&done.token);
                let Some(conn) = conn.as_mut() else { break };
                let out = catch_unwind(AssertUnwindSafe(|| {
                    conn.complete(done.token, done.completion, &mut env)
                }));
                let mut pending = waiting
                    .as_mut()
                    .and_then(|w| w.remove(&done.token))
                    .unwrap_or_default();
                pending.t.disk_ns += done.ns;
                pending.t.handled = clock::now();
                (
                    out.unwrap_or_else(|_| internal_error(c)),
                    Rc::new(Frame::empty()),
                    pending,
                )
            }
        };
        pending.requests.append(&mut out.requests);
        pending.t.bytes_out += out.frames.iter().map(|f| f.len() as u64 + 4).sum::<u64>();
        // What the writer records once the replies are out.
        let mut record = None;
        if let Some(waiting) = waiting.as_mut() {
            match out.intents.first() {
                Some(i) => {
                    waiting.insert(i.token, pending);
                }
                None if !pending.requests.is_empty() || pending.t.bytes_out > 0 => {
                    record = Some(pending);
                }
                None => {}
            }
        }
        let last = out.frames.len().saturating_sub(1);
        if out.frames.is_empty() && record.is_some() {
            let _ = send_tx.unbounded_send(Outgoing {
                frame: None,
                record,
            });
        } else {
            for (i, f) in out.frames.into_iter().enumerate() {
                let record = if i == last { record.take() } else { None };
                let _ = send_tx.unbounded_send(Outgoing {
                    frame: Some(f),
                    record,
                });
            }
        }
        for token in &out.cancel {
            if let Some(stop) = running.remove(token) {
                let _ = stop.send(());
            }
        }
        for intent in out.intents {
            let done = done_tx.clone();
            let frame = frame.clone();
            let scope = scope.clone();
            let (stop, stopped) = oneshot::channel();
            running.insert(intent.token, stop);
            compio::runtime::spawn(async move {
                let _ = done.unbounded_send(Event::Done(
                    data::perform(intent, frame, scope, stopped).await,
                ));
            })
            .detach();
        }
        if out.disconnect {
            break;
        }
        let Some(conn) = conn.as_ref() else { break };
        if deadline.is_some() && conn.has_valid_session() {
            deadline = None;
            authenticated.set(true);
            c.authenticated();
        }
        if let Some(t) = conn.timeout() {
            let at = now + t;
            next_tick = Some(next_tick.map_or(at, |n| n.min(at)));
        }
    }
    drop(reader);
    // The replies already made still go out.
    drop(send_tx);
    let _ = compio::time::timeout(SEND_TIMEOUT, writer).await;
    if let Some(mut conn) = conn {
        // Closing opens may remove files (delete on close): not on the
        // ring's thread.
        let closed = compio::runtime::spawn_blocking(move || {
            let _ = catch_unwind(AssertUnwindSafe(|| conn.shutdown()));
        });
        let _ = closed.await;
    }
}

/// A frame's record while its replies wait for intents.
#[derive(Default)]
struct Pending {
    t: FrameTimes,
    requests: Vec<RequestTrace>,
}

/// A reply for the writer, with the record of the frame it finishes.
struct Outgoing {
    frame: Option<Vec<u8>>,
    record: Option<Pending>,
}

fn record(recorder: &mut Recorder, p: &Pending) {
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

fn internal_error(c: &Accepted) -> Output {
    INTERNAL_ERROR.log(|| {
        format!(
            "connection from {}: internal error, connection closed",
            c.peer
        )
    });
    Output {
        disconnect: true,
        ..Output::default()
    }
}

/// Runs the core on a frame: on this thread when it can only lead to data
/// intents, else on the blocking pool. `conn` is None afterwards only if
/// the core panicked on the pool.
async fn handle(
    conn: &mut Option<Connection>,
    frame: Frame,
    scope: Option<Scope>,
) -> (Output, Rc<Frame>, u64) {
    let Some(mut c) = conn.take() else {
        return (Output::default(), Rc::new(frame), 0);
    };
    let failed = || Output {
        disconnect: true,
        ..Output::default()
    };
    // Runs the core, its VFS calls counted for this connection.
    let run = move |c: &mut Connection, frame: &[u8]| {
        let mut go = || catch_unwind(AssertUnwindSafe(|| c.handle(frame, &mut SystemEnv))).ok();
        match &scope {
            Some(scope) => scope.run(go),
            None => (go(), 0),
        }
    };
    if !Connection::may_block(&frame) {
        let (out, disk) = run(&mut c, &frame);
        *conn = Some(c);
        return (out.unwrap_or_else(failed), Rc::new(frame), disk);
    }
    let ran = compio::runtime::spawn_blocking(move || {
        let (out, disk) = run(&mut c, &frame);
        (c, out, frame, disk)
    })
    .await;
    match ran {
        Ok((c, out, frame, disk)) => {
            *conn = Some(c);
            (out.unwrap_or_else(failed), Rc::new(frame), disk)
        }
        Err(_) => (failed(), Rc::new(Frame::empty()), 0),
    }
}

/// Frames what arrives: small frames several per receive, a large one
/// straight into a buffer of its own. Ends with [`Event::Closed`].
async fn read_frames(
    mut stream: TcpStream,
    mut frames: mpsc::Sender<Event>,
    max_preauth: usize,
    max: usize,
    authenticated: Rc<Cell<bool>>,
    calls: Rc<Calls>,
) {
    // Frames queued or under a write count against what the connection
    // may hold; past it, nothing more is received until some are done.
    let held = Held::default();
    let hold_limit = 2 * max;
    let mut buf: Vec<u8> = Vec::with_capacity(IDLE_RECV);
    // When the bytes at the start of `buf` arrived.
    let mut first_byte = clock::now();
    'reading: loop {
        let mut used = 0;
        while let Some(head) = buf.get(used..used + 4) {
            let len = u32::from_be_bytes([0, head[1], head[2], head[3]]) as usize;
            let limit = if authenticated.get() {
                max
            } else {
                max_preauth
            };
            if head[0] != 0 || len == 0 || len > limit {
                break 'reading;
            }
            let body = used + 4..used + 4 + len;
            if body.end <= buf.len() {
                // Receiving ends when the frame is in a buffer of its own.
                let frame = Frame::new(buf[body.clone()].to_vec(), &held);
                let received = clock::now();
                used = body.end;
                let arrival = Arrival {
                    first_byte,
                    received,
                    parsed: clock::now(),
                };
                if frames.send(Event::Frame(frame, arrival)).await.is_err() {
                    return;
                }
                continue;
            }
            if len > RECV_CHUNK / 2 {
                // Large: read the rest straight into the frame's buffer.
                let mut frame = Vec::with_capacity(len);
                frame.extend_from_slice(&buf[used + 4..]);
                buf.clear();
                used = 0;
                let have = frame.len();
                let BufResult(r, slice) = stream.read_exact(frame.slice(have..len)).await;
                calls.recv.set(calls.recv.get() + 1);
                let received = clock::now();
                let frame = Frame::new(compio::buf::IntoInner::into_inner(slice), &held);
                let arrival = Arrival {
                    first_byte,
                    received,
                    parsed: clock::now(),
                };
                if r.is_err() || frames.send(Event::Frame(frame, arrival)).await.is_err() {
                    break 'reading;
                }
            }
            break;
        }
        buf.drain(..used);
        while held.bytes() > hold_limit {
            compio::time::sleep(Duration::from_millis(1)).await;
        }
        if buf.is_empty() && buf.capacity() > IDLE_RECV * 4 {
            buf = Vec::with_capacity(IDLE_RECV);
        } else if buf.capacity() - buf.len() < IDLE_RECV {
            buf.reserve(RECV_CHUNK);
        }
        let was_empty = buf.is_empty();
        // Behind what is already there: a Vec given whole is read into
        // from its start.
        let have = buf.len();
        let BufResult(r, b) = stream.read(buf.slice(have..)).await;
        calls.recv.set(calls.recv.get() + 1);
        if was_empty {
            first_byte = clock::now();
        }
        buf = compio::buf::IntoInner::into_inner(b);
        match r {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let _ = frames.send(Event::Closed).await;
}

/// Sends replies in order, as many as are queued (up to a batch) with
/// one system call, each behind its 4-byte length; then records the
/// frames they finish.
async fn write_frames(
    mut stream: TcpStream,
    mut replies: mpsc::UnboundedReceiver<Outgoing>,
    calls: Rc<Calls>,
    mut recorder: Option<Recorder>,
) {
    while let Some(first) = replies.next().await {
        let mut bufs = Vec::with_capacity(2 * SEND_BATCH);
        let mut records = Vec::new();
        let mut next = Some(first);
        while let Some(o) = next.take() {
            if let Some(f) = o.frame {
                bufs.push(frame_head(f.len()).to_vec());
                bufs.push(f);
            }
            records.extend(o.record);
            if bufs.len() < 2 * SEND_BATCH {
                next = replies.try_recv().ok();
            }
        }
        if !bufs.is_empty() {
            let sent = compio::time::timeout(SEND_TIMEOUT, stream.write_vectored_all(bufs)).await;
            calls.send.set(calls.send.get() + 1);
            if !matches!(sent, Ok(BufResult(Ok(()), _))) {
                return;
            }
        }
        if let Some(recorder) = recorder.as_mut() {
            let sent = clock::now();
            for mut p in records {
                p.t.sent = sent;
                p.t.recv_calls = calls.recv.take();
                p.t.send_calls = calls.send.take();
                record(recorder, &p);
            }
        }
    }
}

/// The Direct TCP transport's length prefix (MS-SMB2 2.1); the core never
/// makes a frame its 24 bits cannot express.
fn frame_head(len: usize) -> [u8; 4] {
    let len = len as u32;
    [0, (len >> 16) as u8, (len >> 8) as u8, len as u8]
}
