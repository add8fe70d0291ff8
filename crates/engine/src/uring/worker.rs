//! The ring engine's threads: one per core, each a loop over its own ring
//! that waits for completions, steps the connections they concern, and
//! sleeps in the same `io_uring_enter` that submits what the steps
//! started. The first ring also accepts, dealing connections out in turn.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use copyless_core::Server;
use copyless_trace::Tracer;

use super::bell::Bell;
use super::conn::{Conn, Ctx, What};
use super::ops::{Done, Fd, Key, Ops};
use super::poll::Poll;
use super::pool::{Pool, Results};
use super::room;
use crate::admission::Table;
use crate::logons::Logons;
use crate::post::PostOffice;
use crate::{
    admit, end_all, wait_for_stop, Accepted, Connections, LiveLimits, ACCEPT_FAILED, FIRST_BACKOFF,
    MAX_BACKOFF,
};

const RING_ENTRIES: u32 = 1024;
const RECV_POOL_BUFFERS: u16 = 128;
const RECV_CHUNK: usize = 64 * 1024;
/// Threads of the pool shared by every ring.
const POOL_THREADS: usize = 64;
/// A loop that slept this long lets go of the reads' room it kept
/// (`room`): a server at rest holds no more than it needs.
const QUIET: Duration = Duration::from_millis(500);

/// A bell note that a loop's own inbox has news.
pub(super) const NEWS: usize = usize::MAX;

/// What a completion is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Tag {
    Bell,
    Accept(usize),
    Conn(usize, What),
    Cancel,
}

/// Everything a loop's connections share.
#[derive(Clone)]
pub(crate) struct Shared {
    pub server: Arc<Server>,
    pub limits: Arc<LiveLimits>,
    pub tracer: Arc<Tracer>,
    pub logons: Arc<Logons>,
    pub post: Arc<PostOffice>,
}

pub(super) enum ToWorker {
    Serve(Accepted),
    Listen(Vec<TcpListener>, Connections),
    /// Accept no more; end once no connection is left.
    Stop,
}

/// What another loop is told through, and its bell.
pub(super) type Mailbox = Arc<Mutex<Vec<ToWorker>>>;

/// Every loop's mailbox and bell, for the accepting loop to deal to.
pub(super) type Peers = Arc<Mutex<Vec<(Mailbox, Arc<Bell>)>>>;

struct Worker {
    inbox: Arc<Mutex<Vec<ToWorker>>>,
    bell: Arc<Bell>,
    thread: JoinHandle<()>,
}

impl Worker {
    fn tell(&self, what: ToWorker) {
        self.inbox
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(what);
        self.bell.ring(NEWS);
    }
}

pub struct Engine {
    workers: Vec<Worker>,
    post: Arc<PostOffice>,
}

impl Engine {
    pub fn new(
        server: &Arc<Server>,
        limits: &Arc<LiveLimits>,
        tracer: &Arc<Tracer>,
        logons: &Arc<Logons>,
    ) -> io::Result<Engine> {
        let shared = Shared {
            server: server.clone(),
            limits: limits.clone(),
            tracer: tracer.clone(),
            logons: logons.clone(),
            post: Arc::default(),
        };
        let pool = Pool::new(POOL_THREADS);
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut workers = Vec::with_capacity(n);
        let peers: Peers = Arc::default();
        for i in 0..n {
            let inbox: Arc<Mutex<Vec<ToWorker>>> = Arc::default();
            let bell = Bell::new()?;
            peers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((inbox.clone(), bell.clone()));
            let (ready_tx, ready_rx) = std_mpsc::channel();
            let (shared, pool, peers) = (shared.clone(), pool.clone(), peers.clone());
            let (inbox2, bell2) = (inbox.clone(), bell.clone());
            let thread = std::thread::Builder::new()
                .name(format!("uring-{i}"))
                .spawn(move || {
                    let ops = Ops::new(RING_ENTRIES).and_then(|ops| {
                        ops.check_kernel()?;
                        // Without a receive pool (before 5.19) receives bring
                        // their own buffers.
                        match Ops::new(RING_ENTRIES)?.with_recv_pool(RECV_POOL_BUFFERS, RECV_CHUNK)
                        {
                            Ok(pooled) => Ok(pooled),
                            Err(_) => Ok(ops),
                        }
                    });
                    match ops {
                        Ok(ops) => {
                            let _ = ready_tx.send(Ok(()));
                            Loop::new(ops, shared, pool, inbox2, bell2, peers).run();
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                })?;
            match ready_rx.recv() {
                Ok(Ok(())) => workers.push(Worker {
                    inbox,
                    bell,
                    thread,
                }),
                Ok(Err(e)) => {
                    let _ = thread.join();
                    return Err(e);
                }
                Err(_) => return Err(io::Error::other("worker thread ended")),
            }
        }
        Ok(Engine {
            workers,
            post: shared.post,
        })
    }

    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    pub(crate) fn post(&self) -> Arc<PostOffice> {
        self.post.clone()
    }

    pub fn run(
        self,
        listeners: Vec<TcpListener>,
        limits: &Arc<LiveLimits>,
        stop: &std::os::unix::net::UnixStream,
    ) -> io::Result<()> {
        let connections: Connections = Arc::new(Mutex::new(Table::new(limits.get().admission)));
        for l in &listeners {
            l.set_nonblocking(false)?;
        }
        self.workers[0].tell(ToWorker::Listen(listeners, connections.clone()));
        let waited = wait_for_stop(stop);
        for w in &self.workers {
            w.tell(ToWorker::Stop);
        }
        end_all(&connections);
        for w in self.workers {
            let _ = w.thread.join();
        }
        waited
    }
}

pub(super) struct Loop {
    /// The ring, the pool and the pool's results: what the connections
    /// are called with.
    io: Ctx,
    shared: Shared,
    inbox: Arc<Mutex<Vec<ToWorker>>>,
    bell: Arc<Bell>,
    peers: Peers,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// When each connection wants its timer, by time: one entry per
    /// connection at most (`armed` says which).
    timers: std::collections::BTreeSet<(Instant, usize)>,
    armed: Vec<Option<Instant>>,
    ready: Vec<usize>,
    /// The listeners this loop accepts on, each with its accept under
    /// way.
    listeners: Vec<(Arc<TcpListener>, Option<Key>)>,
    /// After an accept failed for want of descriptors or memory: when to
    /// accept again.
    accept_pause: Option<Instant>,
    backoff: Option<Duration>,
    connections: Option<Connections>,
    next_worker: usize,
    stopping: bool,
    poll: Poll,
}

impl Loop {
    pub(super) fn new(
        ops: Ops<Tag>,
        shared: Shared,
        pool: Arc<Pool>,
        inbox: Arc<Mutex<Vec<ToWorker>>>,
        bell: Arc<Bell>,
        peers: Peers,
    ) -> Loop {
        Loop {
            io: Ctx {
                ops,
                pool,
                results: Results::new(bell.clone()),
            },
            shared,
            inbox,
            bell,
            peers,
            conns: Vec::new(),
            free: Vec::new(),
            timers: std::collections::BTreeSet::new(),
            armed: Vec::new(),
            ready: Vec::new(),
            listeners: Vec::new(),
            accept_pause: None,
            backoff: None,
            connections: None,
            next_worker: 0,
            stopping: false,
            poll: Poll::default(),
        }
    }

    pub(super) fn run(mut self) {
        let bell_fd: Fd = self.bell.fd();
        if self
            .io
            .ops
            .read_counter(bell_fd.clone(), Tag::Bell)
            .is_err()
        {
            return;
        }
        let mut done: Vec<Done<Tag>> = Vec::new();
        loop {
            self.step_ready();
            if self.stopping && self.conns.iter().all(Option::is_none) {
                return;
            }
            let now = Instant::now();
            let first = self.timers.first().map(|(at, _)| *at);
            let pause = self.accept_pause;
            let wake = first.into_iter().chain(pause).min().map(|at| {
                at.saturating_duration_since(now)
                    .max(Duration::from_micros(1))
            });
            if !self.idle(wake) {
                return;
            }
            done.clear();
            self.io.ops.reap(&mut done);
            for d in done.drain(..) {
                match d.tag {
                    Tag::Bell => {
                        self.bell_rang();
                        let _ = self.io.ops.read_counter(bell_fd.clone(), Tag::Bell);
                    }
                    Tag::Accept(i) => self.accepted(i, d.result),
                    Tag::Cancel => {}
                    Tag::Conn(slot, what) => {
                        let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                            continue;
                        };
                        match what {
                            What::Recv => c.recv_done(&mut self.io, d.result, d.kept, d.buffer),
                            What::Send => c.send_done(&mut self.io, d.result, d.kept),
                            What::Data(t) => c.data_done(&mut self.io, t, d.result, d.kept, false),
                            What::Sync(t) => c.data_done(&mut self.io, t, d.result, d.kept, true),
                            What::Drain => c.drain_ready(&mut self.io, d.result),
                            What::Cancel => {}
                        }
                        self.ready.push(slot);
                    }
                }
            }
            let now = Instant::now();
            if self.accept_pause.is_some_and(|at| at <= now) {
                self.accept_pause = None;
                self.accept_again();
            }
            while let Some(&(at, slot)) = self.timers.first() {
                if at > now {
                    break;
                }
                self.timers.pop_first();
                self.armed[slot] = None;
                {
                    if let Some(c) = self.conns[slot].as_mut() {
                        c.timer(&mut self.io, now);
                    }
                    self.ready.push(slot);
                }
            }
        }
    }

    /// Waits for completions, `wake` at the longest: looks first while
    /// they have been coming soon (see `poll`), then sleeps. False when
    /// the ring failed.
    fn idle(&mut self, wake: Option<Duration>) -> bool {
        let began = Instant::now();
        let window = self.poll.window().min(wake.unwrap_or(Duration::MAX));
        if !window.is_zero() {
            match self.io.ops.look(window) {
                Ok(true) => return true,
                Ok(false) => {}
                Err(_) => return false,
            }
        }
        if self.io.ops.wait(wake).is_err() {
            return false;
        }
        let slept = began.elapsed();
        if slept >= QUIET {
            room::let_go();
        }
        self.poll.slept(slept);
        true
    }

    fn step_ready(&mut self) {
        let mut ready = std::mem::take(&mut self.ready);
        ready.sort_unstable();
        ready.dedup();
        for slot in ready {
            let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            c.step(&mut self.io);
            c.stop_receiving(&mut self.io);
            if c.ready_to_close() {
                c.close(&mut self.io);
            }
            let wake = if c.shut() {
                self.conns[slot] = None;
                self.free.push(slot);
                if self.conns.iter().all(Option::is_none) {
                    room::let_go();
                }
                None
            } else {
                c.wake_at()
            };
            self.arm(slot, wake);
        }
    }

    /// Keeps connection `slot`'s timer at `wake`.
    fn arm(&mut self, slot: usize, wake: Option<Instant>) {
        if self.armed.len() <= slot {
            self.armed.resize(slot + 1, None);
        }
        if self.armed[slot] == wake {
            return;
        }
        if let Some(old) = self.armed[slot] {
            self.timers.remove(&(old, slot));
        }
        if let Some(at) = wake {
            self.timers.insert((at, slot));
        }
        self.armed[slot] = wake;
    }

    fn bell_rang(&mut self) {
        for who in self.bell.take() {
            if who == NEWS {
                let news =
                    std::mem::take(&mut *self.inbox.lock().unwrap_or_else(|e| e.into_inner()));
                for what in news {
                    self.news(what);
                }
            } else {
                self.ready.push(who);
            }
        }
        for (who, back) in self.io.results.take() {
            let Some(c) = self.conns.get_mut(who).and_then(Option::as_mut) else {
                continue;
            };
            c.back(&mut self.io, back);
            self.ready.push(who);
        }
    }

    fn news(&mut self, what: ToWorker) {
        match what {
            ToWorker::Serve(accepted) => {
                let slot = self.free.pop().unwrap_or_else(|| {
                    self.conns.push(None);
                    self.conns.len() - 1
                });
                match Conn::new(slot, accepted, &self.shared, self.bell.waker(slot)) {
                    Ok(c) => {
                        self.conns[slot] = Some(c);
                        self.ready.push(slot);
                    }
                    Err(_) => self.free.push(slot),
                }
            }
            ToWorker::Listen(listeners, connections) => {
                self.connections = Some(connections);
                for (i, l) in listeners.into_iter().enumerate() {
                    let l = Arc::new(l);
                    let key = self.io.ops.accept(l.clone(), Tag::Accept(i)).ok();
                    self.listeners.push((l, key));
                }
            }
            ToWorker::Stop => {
                self.stopping = true;
                // Each listener closes once its accept has ended.
                for (_, key) in self.listeners.drain(..) {
                    if let Some(key) = key {
                        let _ = self.io.ops.cancel(key, Tag::Cancel);
                    }
                }
            }
        }
    }

    fn accepted(&mut self, i: usize, result: i32) {
        if let Some((_, key)) = self.listeners.get_mut(i) {
            *key = None;
        }
        let passing = [
            libc::ECONNABORTED,
            libc::EINTR,
            libc::EAGAIN,
            libc::ECANCELED,
        ];
        if result < 0 && !passing.contains(&-result) {
            // Out of descriptors or memory: a pause, then again.
            let step = self
                .backoff
                .map_or(FIRST_BACKOFF, |d| (d * 2).min(MAX_BACKOFF));
            let e = io::Error::from_raw_os_error(-result);
            ACCEPT_FAILED.log(|| format!("accept: {e}; not accepting for {} ms", step.as_millis()));
            self.backoff = Some(step);
            self.accept_pause = Some(Instant::now() + step);
            return;
        }
        if result >= 0 {
            self.backoff = None;
            // SAFETY: the kernel made this descriptor for the accepted
            // connection and gave it to us alone with this completion.
            let stream = TcpStream::from(unsafe { OwnedFd::from_raw_fd(result) });
            if self.stopping {
                // Accepted as the server stops: closed unserved.
                return;
            }
            if let (Ok(peer), Some(connections)) = (stream.peer_addr(), &self.connections) {
                if let Some(accepted) = admit(stream, peer, &self.shared.limits, connections) {
                    let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
                    let (inbox, bell) = &peers[self.next_worker % peers.len()];
                    self.next_worker = self.next_worker.wrapping_add(1);
                    inbox
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(ToWorker::Serve(accepted));
                    bell.ring(NEWS);
                }
            }
        }
        if self.accept_pause.is_none() {
            self.accept_again();
        }
    }

    /// Starts an accept on each listener that has none under way.
    fn accept_again(&mut self) {
        for (i, (l, key)) in self.listeners.iter_mut().enumerate() {
            if key.is_none() {
                *key = self.io.ops.accept(l.clone(), Tag::Accept(i)).ok();
            }
        }
    }
}
