//! One connection on its own thread: frames in, replies out, the
//! pre-authentication deadline, and the core's timer.
//!
//! The socket stays blocking. Between frames the thread waits in `poll`
//! on the socket and its inbox's bell, with a timeout for the core's timer
//! and the deadline, so an idle connection costs no system calls beyond
//! one wake-up per timer or letter; within a frame, a receive timeout
//! keeps a client that stops half-way from holding the thread.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use copyless_core::{Connection, Output, Server};
use copyless_trace::{clock, FrameTimes, Recorder, Request, Tracer};
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::net::RecvFlags;

use super::timing::{self, CountingWriter, TimedReader};
use crate::env::SystemEnv;
use crate::framing::{write_frame, FrameReader, Progress};
use crate::log_limit::RateLimit;
use crate::logons::Logons;
use crate::post::{Arrivals, Inbox, PostOffice, Posted};

/// A client that takes no bytes of a reply for this long is gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(60);

static INTERNAL_ERROR: RateLimit = RateLimit::new(Duration::from_secs(10));

/// Where a connection's output goes besides its socket.
#[derive(Clone, Copy)]
pub struct Outlets<'a> {
    pub tracer: &'a Arc<Tracer>,
    pub logons: &'a Logons,
    /// Letters for other connections.
    pub post: &'a Arc<PostOffice>,
}

/// Serves one connection until it closes; `on_authenticated` runs once,
/// when the first session completes authentication.
pub fn serve(
    server: Arc<Server>,
    stream: &Arc<TcpStream>,
    preauth_timeout: Duration,
    outlets: Outlets<'_>,
    on_authenticated: impl FnOnce(),
) {
    let Outlets { tracer, post, .. } = outlets;
    let accepted = Instant::now();
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    // Made on this thread, and dropped after the shutdown below, so that
    // every filesystem call of the connection is counted for it.
    let mut recorder = tracer.connection(peer.ip());
    let mut conn = Connection::new(server, peer, local);
    let arrivals = Arrivals::new(stream.clone());
    let Ok(inbox) = post.open(conn.id(), true, Some(arrivals.clone())) else {
        return;
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut run = Run {
            stream,
            arrivals: &arrivals,
            post,
            logons: outlets.logons,
            inbox,
            held: VecDeque::new(),
            deadline: Some(accepted + preauth_timeout),
            on_authenticated: Some(on_authenticated),
            timeout: None,
        };
        run.serve(&mut conn, recorder.as_mut())
    }));
    if result.is_err() {
        INTERNAL_ERROR.log(|| format!("connection from {peer}: internal error, connection closed"));
    }
    let _ = stream.shutdown(Shutdown::Both);
    // Release share modes and run delete-on-close even after a panic.
    // Lock requests its locks held up, on other connections, are woken.
    if let Ok(letters) = catch_unwind(AssertUnwindSafe(|| conn.shutdown())) {
        post.send(letters);
    }
    drop(conn);
    crate::memory::connection_gone();
}

struct Run<'a, F> {
    stream: &'a TcpStream,
    arrivals: &'a Arrivals,
    post: &'a PostOffice,
    logons: &'a Logons,
    inbox: Inbox,
    /// Letters taken from the inbox that wait for frames that had begun
    /// to arrive when they were posted (post.rs).
    held: VecDeque<Posted>,
    /// Until a session authenticates: when the connection is closed.
    deadline: Option<Instant>,
    on_authenticated: Option<F>,
    /// The receive timeout set on the socket now.
    timeout: Option<Duration>,
}

impl<F: FnOnce()> Run<'_, F> {
    fn serve(&mut self, conn: &mut Connection, mut recorder: Option<&mut Recorder>) {
        let mut env = SystemEnv;
        let mut reader = TimedReader::new(
            SocketReader {
                stream: self.stream,
                arrivals: self.arrivals,
                taken: 0,
                dont_wait: false,
            },
            recorder.is_some(),
        );
        let mut writer = CountingWriter {
            inner: self.stream,
            calls: 0,
        };
        if self.stream.set_write_timeout(Some(SEND_TIMEOUT)).is_err() {
            return;
        }
        let mut frames = FrameReader::default();
        let mut next_tick = conn.timeout().map(|t| Instant::now() + t);
        loop {
            if self.set_timeout(next_tick).is_err() {
                return;
            }
            let max = conn.max_message_size(self.deadline.is_none());
            let (letters, readable) = if frames.in_frame() {
                (false, true)
            } else if !self.held.is_empty() {
                // Read below, without waiting, if at all.
                (false, false)
            } else {
                reader.calls += 1;
                // A channel whose relayed frames wait elsewhere reads no
                // more until they are done; letters still come.
                match self.wait(conn.wants_frames()) {
                    Ok(ready) => ready,
                    Err(_) => return,
                }
            };
            if letters {
                self.held.extend(self.inbox.take());
            }
            // Where the frame being read began: letters posted before its
            // first byte came go first.
            let next_frame = reader.inner().taken - frames.partial() as u64;
            while self.held.front().is_some_and(|p| p.mark <= next_frame) {
                if !self.deliver(conn, &mut writer, &mut env) {
                    return;
                }
            }
            // The rest wait for the frame under way, if the socket has all
            // of it now; else they go now.
            let early = !self.held.is_empty() && conn.wants_frames();
            reader.inner_mut().dont_wait = early;
            let progress = if readable || early {
                match frames.fill(&mut reader, max) {
                    Ok(p) => p,
                    Err(_) => return,
                }
            } else {
                Progress::Waiting
            };
            reader.inner_mut().dont_wait = false;
            if !matches!(progress, Progress::Frame) {
                while !self.held.is_empty() {
                    if !self.deliver(conn, &mut writer, &mut env) {
                        return;
                    }
                }
            }
            let now = Instant::now();
            if self.deadline.is_some_and(|d| now >= d) {
                // Too slow to authenticate, however busy it kept us.
                return;
            }
            match progress {
                Progress::Closed => return,
                Progress::Waiting => {
                    if next_tick.is_some_and(|t| now >= t) {
                        // Held requests that run again may leave
                        // intents and calls, as frames do.
                        let out = conn.handle_timeout(&mut env);
                        let out = conn.perform_intents(out, &[], &mut env);
                        if !send(&mut writer, self.post, self.logons, out) {
                            return;
                        }
                        next_tick = conn.timeout().map(|t| now + t);
                    }
                    frames.shrink_when_idle();
                }
                Progress::Frame => {
                    writer.calls = 0;
                    let sent = match recorder.as_deref_mut() {
                        None => {
                            let frame = frames.frame_mut();
                            let out = conn.handle_in_place(frame, &mut env);
                            let out = conn.perform_intents(out, frame, &mut env);
                            send(&mut writer, self.post, self.logons, out)
                        }
                        Some(recorder) => handle_traced(
                            conn,
                            frames.frame_mut(),
                            &mut env,
                            &reader,
                            &mut writer,
                            (self.post, self.logons),
                            recorder,
                        ),
                    };
                    frames.next();
                    reader.reset();
                    if !sent {
                        return;
                    }
                    if self.deadline.is_some() && conn.has_valid_session() {
                        self.deadline = None;
                        if let Some(f) = self.on_authenticated.take() {
                            f();
                        }
                    }
                    if next_tick.is_none() {
                        next_tick = conn.timeout().map(|t| now + t);
                    }
                }
            }
        }
    }

    /// Hands the first held letter to the core and sends what it answers;
    /// false when the client takes no more.
    fn deliver(
        &mut self,
        conn: &mut Connection,
        writer: &mut CountingWriter<&TcpStream>,
        env: &mut SystemEnv,
    ) -> bool {
        let Some(Posted { letter, .. }) = self.held.pop_front() else {
            return true;
        };
        let out = conn.receive(letter, env);
        let out = conn.perform_intents(out, &[], env);
        send(writer, self.post, self.logons, out)
    }

    /// Waits between frames for the client or a letter, until the socket
    /// timeout set by [`Run::set_timeout`]: whether letters came, and
    /// whether the socket has bytes (or news of its end).
    fn wait(&mut self, reading: bool) -> io::Result<(bool, bool)> {
        let Some(bell) = self.inbox.bell() else {
            return Ok((false, true));
        };
        let timeout = self.timeout.and_then(|t| Timespec::try_from(t).ok());
        // Not reading, the socket still reports a hang-up or an error.
        let socket = if reading {
            PollFlags::IN
        } else {
            PollFlags::empty()
        };
        let mut fds = [
            PollFd::new(self.stream, socket),
            PollFd::from_borrowed_fd(bell, PollFlags::IN),
        ];
        loop {
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok((!fds[1].revents().is_empty(), !fds[0].revents().is_empty()))
    }

    /// Sets the socket's receive timeout so that the thread wakes for the
    /// deadline or the core's timer, whichever comes first; no timeout when
    /// neither is due. The system call is made only when it changes.
    fn set_timeout(&mut self, next_tick: Option<Instant>) -> io::Result<()> {
        let now = Instant::now();
        let until = match (self.deadline, next_tick) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Rounded to whole 100 ms steps so that small drifts do not cost a
        // system call each time; at least 1 ms (zero means "never").
        let wanted = until.map(|u| {
            let left = u.saturating_duration_since(now).as_millis() as u64;
            Duration::from_millis(left.div_ceil(100).max(1) * 100)
        });
        if wanted != self.timeout {
            self.stream.set_read_timeout(wanted)?;
            self.timeout = wanted;
        }
        Ok(())
    }
}

/// Reads the socket, counting what it takes for the letters' marks; with
/// `dont_wait`, only what is there already.
struct SocketReader<'a> {
    stream: &'a TcpStream,
    arrivals: &'a Arrivals,
    /// Bytes taken so far.
    taken: u64,
    dont_wait: bool,
}

impl Read for SocketReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let flags = if self.dont_wait {
            RecvFlags::DONTWAIT
        } else {
            RecvFlags::empty()
        };
        let (n, _) = rustix::net::recv(self.stream, buf, flags)?;
        self.arrivals.took(n);
        self.taken += n as u64;
        Ok(n)
    }
}

/// Handles and answers a frame as the untraced path does, noting the
/// clock at each phase boundary.
fn handle_traced(
    conn: &mut Connection,
    buf: &mut [u8],
    env: &mut SystemEnv,
    reader: &TimedReader<SocketReader<'_>>,
    writer: &mut CountingWriter<&TcpStream>,
    (post, logons): (&PostOffice, &Logons),
    recorder: &mut Recorder,
) -> bool {
    let mut t = FrameTimes {
        received: clock::now(),
        ..FrameTimes::default()
    };
    t.first_byte = reader.first_byte.unwrap_or(t.received);
    timing::start_requests(buf);
    t.parsed = clock::now();
    // The threaded engine runs a frame as soon as it is parsed: nothing is
    // queued.
    t.dispatched = t.parsed;
    let out = conn.handle_in_place(buf, env);
    let mut out = conn.perform_intents(out, buf, env);
    t.handled = clock::now();
    t.bytes_out = out.frames.iter().map(|f| f.len() as u64 + 4).sum();
    let requests = std::mem::take(&mut out.requests);
    let sent = send(writer, post, logons, out);
    t.sent = clock::now();
    t.bytes_in = buf.len() as u64 + 4;
    t.recv_calls = reader.calls;
    t.send_calls = writer.calls;
    recorder.frame(
        &t,
        requests.iter().map(|r| Request {
            command: r.command,
            message_id: r.message_id,
            status: r.status,
            share: r.share,
            user: r.user.as_deref(),
        }),
    );
    sent
}

/// Posts the letters and reports the events, then writes the replies (a
/// client that acts on a reply finds the letters delivered); false when
/// the connection is finished (a write failed or timed out, or the core
/// asked to disconnect).
fn send<W: Write>(
    writer: &mut CountingWriter<W>,
    post: &PostOffice,
    logons: &Logons,
    out: Output,
) -> bool {
    post.send(out.messages);
    logons.report(out.events);
    for f in &out.frames {
        if write_frame(writer, f).is_err() {
            return false;
        }
    }
    !out.disconnect
}
