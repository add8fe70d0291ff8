//! Recording: the process-wide [`Tracer`] and the per-connection
//! [`Recorder`] that the engine feeds with each frame's timestamps.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::clock;
use crate::phase::Phase;
use crate::probes;
use crate::snapshot::Snapshot;
use crate::stats::{ClientKey, ClientStats, Stats};
use crate::syscall::{Syscall, SYSCALLS};

/// One thread's statistics. Only its own thread writes them; a reader
/// takes the lock for the moment it copies them.
pub(crate) struct Slot {
    stats: Mutex<Stats>,
    /// Counted apart from `stats` so that a VFS call costs one atomic add
    /// rather than a lock.
    syscalls: [AtomicU64; SYSCALLS],
}

impl Slot {
    fn new(shares: usize) -> Slot {
        Slot {
            stats: Mutex::new(Stats::new(shares)),
            syscalls: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Stats> {
        // A panic while recording leaves counters that are at worst one
        // request behind; keep going.
        self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn count(&self, kind: Syscall, n: u64) {
        if let Some(c) = self.syscalls.get(kind.index()) {
            c.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn copy(&self) -> Stats {
        let mut stats = self.lock().clone();
        for (total, c) in stats.syscalls.iter_mut().zip(&self.syscalls) {
            *total += c.load(Ordering::Relaxed);
        }
        stats
    }
}

thread_local! {
    /// The slot of the connection this thread serves, for the VFS adapter.
    static CURRENT: RefCell<Option<Arc<Slot>>> = const { RefCell::new(None) };
    /// Time spent in VFS calls since the recorder last looked.
    static DISK_NS: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f` on this thread's slot, or on the tracer's shared one when the
/// thread serves no connection.
pub(crate) fn with_slot<R>(tracer: &Tracer, f: impl FnOnce(&Slot) -> R) -> R {
    CURRENT.with(|current| match &*current.borrow() {
        Some(slot) => f(slot),
        None => f(&tracer.other),
    })
}

pub(crate) fn add_disk_ns(ns: u64) {
    DISK_NS.with(|d| d.set(d.get().saturating_add(ns)));
}

fn take_disk_ns() -> u64 {
    DISK_NS.with(|d| d.replace(0))
}

struct Registry {
    live: Vec<Arc<Slot>>,
    /// Everything recorded by connections that have ended.
    retired: Stats,
}

/// The server's tracing state: where recorders register and where readers
/// merge them.
pub struct Tracer {
    enabled: bool,
    started: u64,
    /// By the server's share index; a reload may add names.
    share_names: RwLock<Vec<String>>,
    registry: Mutex<Registry>,
    /// For VFS calls made on a thread that serves no connection.
    other: Slot,
    /// Logons by outcome: counted whether or not tracing is on, and
    /// rare enough for a lock.
    logons: Mutex<BTreeMap<&'static str, u64>>,
    /// The latest failed logons, oldest first, at most
    /// [`FAILED_LOGONS_KEPT`]: a client may fail as often as it likes.
    failed_logons: Mutex<VecDeque<FailedLogon>>,
}

/// Failed logons a [`Tracer`] remembers, for the dashboard.
pub const FAILED_LOGONS_KEPT: usize = 20;
/// The most characters of a failed logon's user name kept: the client
/// chooses it.
pub const FAILED_LOGON_USER_CHARS: usize = 64;

/// A logon that failed, as the dashboard lists it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FailedLogon {
    /// When, in seconds since the Unix epoch.
    pub t: f64,
    pub client: IpAddr,
    /// As the client sent it, cut to [`FAILED_LOGON_USER_CHARS`].
    pub user: String,
    /// `bad_credentials` or `failed` (the core's `logon::Outcome`).
    pub outcome: &'static str,
}

impl Tracer {
    /// `share_names` are in the order of the server's shares, so that the
    /// core's share index names them.
    pub fn new(share_names: Vec<String>, enabled: bool) -> Arc<Tracer> {
        clock::calibrate();
        let shares = share_names.len();
        Arc::new(Tracer {
            enabled,
            started: clock::now(),
            share_names: RwLock::new(share_names),
            registry: Mutex::new(Registry {
                live: Vec::new(),
                retired: Stats::new(shares),
            }),
            other: Slot::new(shares),
            logons: Mutex::new(BTreeMap::new()),
            failed_logons: Mutex::new(VecDeque::with_capacity(FAILED_LOGONS_KEPT)),
        })
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    fn share_names(&self) -> std::sync::RwLockReadGuard<'_, Vec<String>> {
        self.share_names.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Names the share at `index` (a reload added or renamed it); its
    /// figures so far stay with the index.
    pub fn name_share(&self, index: usize, name: &str) {
        let mut names = self.share_names.write().unwrap_or_else(|e| e.into_inner());
        if names.len() <= index {
            names.resize(index + 1, String::new());
        }
        names[index] = name.to_string();
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A recorder for a new connection from `peer`, to be made on the
    /// thread that serves it; None when tracing is off.
    pub fn connection(self: &Arc<Self>, peer: IpAddr) -> Option<Recorder> {
        if !self.enabled {
            return None;
        }
        let slot = Arc::new(Slot::new(self.share_names().len()));
        let key = ClientKey {
            address: Some(peer),
            user: String::new(),
        };
        let client = {
            let mut stats = slot.lock();
            stats.connections = 1;
            let i = stats.client_index(&key);
            if let Some((_, c)) = stats.clients.get_mut(i) {
                c.connections = 1;
            }
            i
        };
        self.registry().live.push(slot.clone());
        CURRENT.with(|c| *c.borrow_mut() = Some(slot.clone()));
        take_disk_ns();
        Some(Recorder {
            tracer: self.clone(),
            slot,
            who: Who {
                address: peer,
                user: None,
                client,
            },
            idle_since: clock::now(),
        })
    }

    /// Shows `outcomes` from the start, at 0 until one happens: a
    /// series that exists before its first logon is easier to alert on.
    pub fn expect_logons(&self, outcomes: &[&'static str]) {
        let mut logons = self.logons.lock().unwrap_or_else(|e| e.into_inner());
        for outcome in outcomes {
            logons.entry(outcome).or_insert(0);
        }
    }

    /// Counts a logon (a SESSION_SETUP that ended) by its outcome.
    pub fn count_logon(&self, outcome: &'static str) {
        let mut logons = self.logons.lock().unwrap_or_else(|e| e.into_inner());
        *logons.entry(outcome).or_insert(0) += 1;
    }

    /// Remembers a failed logon, forgetting the oldest beyond
    /// [`FAILED_LOGONS_KEPT`]; kept whether or not tracing is on, as the
    /// counts are.
    pub fn note_failed_logon(&self, client: IpAddr, user: &str, outcome: &'static str) {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let logon = FailedLogon {
            t,
            client,
            user: user.chars().take(FAILED_LOGON_USER_CHARS).collect(),
            outcome,
        };
        let mut kept = self.failed_logons.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() == FAILED_LOGONS_KEPT {
            kept.pop_front();
        }
        kept.push_back(logon);
    }

    /// The latest failed logons, oldest first.
    pub fn failed_logons(&self) -> Vec<FailedLogon> {
        let kept = self.failed_logons.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().cloned().collect()
    }

    /// Everything recorded since the server started, merged over all
    /// threads.
    pub fn snapshot(&self) -> Snapshot {
        let (mut total, live) = {
            let registry = self.registry();
            let mut total = registry.retired.clone();
            for slot in &registry.live {
                total.merge(&slot.copy());
            }
            (total, registry.live.len())
        };
        total.merge(&self.other.copy());
        let mut snapshot = total.snapshot(&self.share_names());
        snapshot.enabled = self.enabled;
        snapshot.elapsed_ns = clock::nanos(self.started, clock::now());
        snapshot.live_connections = live as u64;
        snapshot
            .clients
            .retain(|c| c.requests > 0 || c.connections > 0);
        snapshot.logons = self
            .logons
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        snapshot
    }
}

/// One request of a frame, as the protocol core reports it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub command: u16,
    pub message_id: u64,
    pub status: u32,
    /// Index of the request's share among the tracer's shares.
    pub share: Option<usize>,
    /// The session's user, once authenticated.
    pub user: Option<&'a str>,
}

/// Clock readings ([`clock::now`]) at one frame's phase boundaries, and
/// what the frame cost in bytes and socket calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameTimes {
    /// The first read that returned bytes of this frame.
    pub first_byte: u64,
    /// The frame's last byte read.
    pub received: u64,
    /// The engine has read the frame's headers.
    pub parsed: u64,
    /// The protocol core starts on the frame.
    pub dispatched: u64,
    /// The protocol core is done.
    pub handled: u64,
    /// The reply's last byte written.
    pub sent: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub recv_calls: u64,
    pub send_calls: u64,
    /// Time in disk I/O the engine measured itself (intents it carried
    /// out, VFS calls made on other threads), beyond what VFS calls on
    /// this thread added.
    pub disk_ns: u64,
}

/// Records one connection's frames; lives on the connection's thread.
pub struct Recorder {
    tracer: Arc<Tracer>,
    slot: Arc<Slot>,
    who: Who,
    /// When the previous reply was sent (or the connection started).
    idle_since: u64,
}

/// NTSTATUS severity "error", but not the SESSION_SETUP "more processing
/// required" that every successful login passes through.
fn is_error(status: u32) -> bool {
    const MORE_PROCESSING_REQUIRED: u32 = 0xC000_0016;
    status >> 30 == 3 && status != MORE_PROCESSING_REQUIRED
}

/// The `i`th of `n` even parts of `total`, the remainder going to the
/// first.
fn part(total: u64, n: u64, i: u64) -> u64 {
    if n == 0 {
        return 0;
    }
    total / n + if i == 0 { total % n } else { 0 }
}

impl Recorder {
    /// Records a frame and the requests it held, and fires the
    /// `request_done` probe for each.
    pub fn frame<'a, I>(&mut self, t: &FrameTimes, requests: I)
    where
        I: IntoIterator<Item = Request<'a>>,
        I::IntoIter: ExactSizeIterator,
    {
        let requests = requests.into_iter();
        let handling = clock::nanos(t.dispatched, t.handled);
        let disk = (t.disk_ns + take_disk_ns()).min(handling);
        let mut phases = [0u64; 7];
        phases[Phase::Waiting.index()] = clock::nanos(self.idle_since, t.first_byte);
        phases[Phase::Receiving.index()] = clock::nanos(t.first_byte, t.received);
        phases[Phase::Parsing.index()] = clock::nanos(t.received, t.parsed);
        phases[Phase::Queued.index()] = clock::nanos(t.parsed, t.dispatched);
        phases[Phase::Running.index()] = handling - disk;
        phases[Phase::DiskIo.index()] = disk;
        phases[Phase::Sending.index()] = clock::nanos(t.handled, t.sent);
        self.idle_since = t.sent;
        let busy = clock::nanos(t.first_byte, t.sent);
        let n = requests.len() as u64;
        let each = busy.checked_div(n).unwrap_or(0);

        let mut stats = self.slot.lock();
        stats.syscalls[Syscall::Recv.index()] += t.recv_calls;
        stats.syscalls[Syscall::Send.index()] += t.send_calls;
        stats.frames += 1;
        stats.requests += n;
        stats.bytes_in += t.bytes_in;
        stats.bytes_out += t.bytes_out;
        for (total, ns) in stats.phase_ns.iter_mut().zip(phases) {
            *total += ns;
        }
        if n == 0 {
            // An SMB1 negotiate, or a frame the core refused outright.
            if let Some((_, c)) = stats.clients.get_mut(self.who.client) {
                c.bytes_in += t.bytes_in;
                c.bytes_out += t.bytes_out;
                c.busy_ns += busy;
            }
        }
        for (i, r) in (0u64..).zip(requests) {
            let bytes_in = part(t.bytes_in, n, i);
            let bytes_out = part(t.bytes_out, n, i);
            stats.command(r.command).record(each, is_error(r.status));
            if let Some(share) = r.share.and_then(|s| stats.share(s)) {
                share.requests += 1;
                share.bytes_in += bytes_in;
                share.bytes_out += bytes_out;
                share.busy_ns += each;
            }
            if let Some(user) = r.user {
                self.who.switch(&mut stats, user);
            }
            if let Some((_, c)) = stats.clients.get_mut(self.who.client) {
                c.requests += 1;
                c.bytes_in += bytes_in;
                c.bytes_out += bytes_out;
                c.busy_ns += each;
            }
            probes::request_done(r.message_id, r.command, r.status, each);
        }
    }
}

/// Whose requests a connection is carrying.
struct Who {
    address: IpAddr,
    /// The user of the last authenticated request.
    user: Option<String>,
    /// Index of the current (address, user) entry in the slot's clients.
    client: usize,
}

impl Who {
    /// Moves the connection's view to `user`. What was recorded before any
    /// user was known goes with the first user.
    fn switch(&mut self, stats: &mut Stats, user: &str) {
        if self.user.as_deref() == Some(user) {
            return;
        }
        let key = ClientKey {
            address: Some(self.address),
            user: user.to_string(),
        };
        let i = stats.client_index(&key);
        if self.user.is_none() && i != self.client {
            let before = stats
                .clients
                .get_mut(self.client)
                .map(|(_, c)| std::mem::take(c))
                .unwrap_or_default();
            if let Some((_, c)) = stats.clients.get_mut(i) {
                c.merge(&before);
            }
        }
        if self.user.is_some() {
            // A second user on this connection: count the connection for
            // them too.
            if let Some((_, c)) = stats.clients.get_mut(i) {
                c.connections = c.connections.max(1);
            }
        }
        self.client = i;
        self.user = Some(user.to_string());
    }
}

impl Recorder {
    /// Where this connection's VFS calls are counted, for a thread that
    /// works for it now and then (a pool thread, or a loop serving many
    /// connections).
    pub fn scope(&self) -> Scope {
        Scope {
            slot: self.slot.clone(),
        }
    }
}

/// A connection's place for VFS calls, usable on any thread.
#[derive(Clone)]
pub struct Scope {
    slot: Arc<Slot>,
}

impl Scope {
    /// Runs `f` with its VFS calls counted for this connection; returns
    /// its result and the time those calls took.
    pub fn run<R>(&self, f: impl FnOnce() -> R) -> (R, u64) {
        let before = CURRENT.with(|c| c.replace(Some(self.slot.clone())));
        let outer = take_disk_ns();
        let r = f();
        let disk = take_disk_ns();
        DISK_NS.with(|d| d.set(outer));
        CURRENT.with(|c| *c.borrow_mut() = before);
        (r, disk)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            if c.as_ref().is_some_and(|s| Arc::ptr_eq(s, &self.slot)) {
                *c = None;
            }
        });
        let mut registry = self.tracer.registry();
        registry.live.retain(|s| !Arc::ptr_eq(s, &self.slot));
        let mut stats = self.slot.copy();
        stats.clients.retain(|(_, c)| !is_empty(c));
        registry.retired.merge(&stats);
    }
}

fn is_empty(c: &ClientStats) -> bool {
    c.connections == 0 && c.requests == 0 && c.bytes_in == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip() -> IpAddr {
        IpAddr::from([192, 168, 1, 20])
    }

    /// Frame times with each phase taking `step` ticks' worth of real time.
    fn frame_after(start: u64) -> FrameTimes {
        let spin = |from: u64| {
            while clock::nanos(from, clock::now()) < 2_000 {}
            clock::now()
        };
        let first_byte = spin(start);
        let received = spin(first_byte);
        let parsed = spin(received);
        let dispatched = parsed;
        let handled = spin(dispatched);
        let sent = spin(handled);
        FrameTimes {
            first_byte,
            received,
            parsed,
            dispatched,
            handled,
            sent,
            bytes_in: 100,
            bytes_out: 60,
            recv_calls: 2,
            send_calls: 1,
            disk_ns: 0,
        }
    }

    fn req(command: u16, status: u32, user: Option<&str>) -> Request<'_> {
        Request {
            command,
            message_id: 1,
            status,
            share: Some(0),
            user,
        }
    }

    #[test]
    fn a_scope_counts_for_its_connection_on_any_thread() {
        let tracer = Tracer::new(vec!["data".into()], true);
        let rec = tracer.connection(ip()).unwrap();
        let scope = rec.scope();
        let (on_pool, disk) = std::thread::spawn(move || {
            add_disk_ns(7);
            let r = scope.run(|| {
                add_disk_ns(40);
                with_slot(&tracer, |slot| slot.count(Syscall::Stat, 1));
                "done"
            });
            // What was outside the scope stays outside it.
            (r, take_disk_ns())
        })
        .join()
        .unwrap();
        assert_eq!(on_pool, ("done", 40));
        assert_eq!(disk, 7);
        assert_eq!(rec.slot.copy().syscalls[Syscall::Stat.index()], 1);
    }

    #[test]
    fn frames_feed_every_view() {
        let tracer = Tracer::new(vec!["data".into()], true);
        let mut rec = tracer.connection(ip()).unwrap();
        let t = frame_after(clock::now());
        rec.frame(&t, [req(0, 0, None)]);
        let t = frame_after(t.sent);
        rec.frame(&t, [req(1, 0xC000_0016, None)]);
        let t = frame_after(t.sent);
        // A compound of two.
        rec.frame(
            &t,
            [req(5, 0, Some("alice")), req(6, 0xC000_0034, Some("alice"))],
        );

        let s = tracer.snapshot();
        assert!(s.enabled);
        assert_eq!((s.frames, s.requests), (3, 4));
        assert_eq!((s.bytes_in, s.bytes_out), (300, 180));
        assert_eq!(s.live_connections, 1);
        for phase in Phase::ALL {
            let ns = s.phase_ns[phase.index()];
            match phase {
                Phase::Queued | Phase::DiskIo => assert_eq!(ns, 0, "{}", phase.name()),
                _ => assert!(ns >= 3 * 2_000, "{} {ns}", phase.name()),
            }
        }
        assert_eq!(s.command(1).unwrap().errors, 0);
        assert_eq!(s.command(6).unwrap().errors, 1);
        assert_eq!(s.command(5).unwrap().count, 1);
        assert_eq!(s.syscalls["recv"], 6);
        assert_eq!(s.syscalls["send"], 3);
        assert_eq!(s.shares[0].requests, 4);
        // The anonymous start of the connection went to alice.
        assert_eq!(s.clients.len(), 1);
        let c = &s.clients[0];
        assert_eq!(
            (c.user.as_str(), c.connections, c.requests),
            ("alice", 1, 4)
        );
        assert_eq!(c.address, "192.168.1.20");
        assert_eq!(c.bytes_in, 300);

        drop(rec);
        let s = tracer.snapshot();
        assert_eq!(s.live_connections, 0);
        assert_eq!(s.connections, 1);
        assert_eq!(s.requests, 4);
        assert_eq!(s.clients[0].requests, 4);
    }

    #[test]
    fn disk_time_is_carved_out_of_running() {
        let tracer = Tracer::new(vec![], true);
        let mut rec = tracer.connection(ip()).unwrap();
        let t = frame_after(clock::now());
        let handling = clock::nanos(t.dispatched, t.handled);
        add_disk_ns(handling / 2);
        rec.frame(&t, [req(8, 0, Some("bob"))]);
        let s = tracer.snapshot();
        let disk = s.phase_ns[Phase::DiskIo.index()];
        let running = s.phase_ns[Phase::Running.index()];
        assert_eq!(disk, handling / 2);
        assert_eq!(disk + running, handling);
        // More disk time than the frame had cannot be.
        let t = frame_after(t.sent);
        add_disk_ns(u64::MAX);
        rec.frame(&t, [req(8, 0, Some("bob"))]);
        let s2 = tracer.snapshot();
        assert_eq!(s2.phase_ns[Phase::Running.index()], running);
    }

    #[test]
    fn disabled_tracer_records_nothing() {
        let tracer = Tracer::new(vec![], false);
        assert!(tracer.connection(ip()).is_none());
        let s = tracer.snapshot();
        assert!(!s.enabled);
        assert_eq!(s.requests, 0);
    }

    #[test]
    fn the_latest_failed_logons_are_kept_and_bounded() {
        let tracer = Tracer::new(vec![], false);
        assert!(tracer.failed_logons().is_empty());
        let long = "x".repeat(FAILED_LOGON_USER_CHARS + 10);
        tracer.note_failed_logon(ip(), &long, "failed");
        let kept = tracer.failed_logons();
        assert_eq!(kept[0].user.chars().count(), FAILED_LOGON_USER_CHARS);
        assert_eq!((kept[0].client, kept[0].outcome), (ip(), "failed"));
        assert!(kept[0].t > 0.0);
        for i in 0..FAILED_LOGONS_KEPT + 3 {
            tracer.note_failed_logon(ip(), &format!("user{i}"), "bad_credentials");
        }
        let kept = tracer.failed_logons();
        assert_eq!(kept.len(), FAILED_LOGONS_KEPT);
        assert_eq!(kept[0].user, "user3");
        assert_eq!(
            kept.last().unwrap().user,
            format!("user{}", FAILED_LOGONS_KEPT + 2)
        );
    }

    #[test]
    fn logons_are_counted_even_with_tracing_off() {
        let tracer = Tracer::new(vec![], false);
        tracer.expect_logons(&["success", "bad_credentials"]);
        tracer.count_logon("bad_credentials");
        tracer.count_logon("bad_credentials");
        tracer.count_logon("failed");
        let logons = tracer.snapshot().logons;
        assert_eq!(
            logons.into_iter().collect::<Vec<_>>(),
            [
                ("bad_credentials".to_string(), 2),
                ("failed".to_string(), 1),
                ("success".to_string(), 0)
            ]
        );
    }

    #[test]
    fn connections_on_other_threads_are_merged_when_read() {
        let tracer = Tracer::new(vec![], true);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let tracer = tracer.clone();
                std::thread::spawn(move || {
                    let mut rec = tracer.connection(ip()).unwrap();
                    let mut start = clock::now();
                    for _ in 0..25 {
                        let t = frame_after(start);
                        rec.frame(&t, [req(9, 0, Some("carol"))]);
                        start = t.sent;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = tracer.snapshot();
        assert_eq!(s.connections, 4);
        assert_eq!(s.command(9).unwrap().count, 100);
        assert_eq!(s.clients.len(), 1);
        assert_eq!(s.clients[0].connections, 4);
    }

    /// What recording costs per request, outside any server: run with
    /// `cargo test -p copyless-trace --release -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn cost_per_frame() {
        let tracer = Tracer::new(vec!["s".into()], true);
        let mut rec = tracer.connection(ip()).unwrap();
        const N: u32 = 1_000_000;
        let user = String::from("alice");
        let start = std::time::Instant::now();
        for i in 0..N {
            // The six readings the engine takes per frame.
            let mut t = FrameTimes {
                first_byte: clock::now(),
                received: clock::now(),
                parsed: clock::now(),
                ..FrameTimes::default()
            };
            t.dispatched = t.parsed;
            t.handled = clock::now();
            t.sent = clock::now();
            t.bytes_in = 4096;
            t.recv_calls = 2;
            t.send_calls = 1;
            rec.frame(
                &t,
                [Request {
                    command: 8,
                    message_id: u64::from(i),
                    status: 0,
                    share: Some(0),
                    user: Some(&user),
                }],
            );
        }
        let ns = start.elapsed().as_nanos() / u128::from(N);
        println!("recording one single-request frame: {ns} ns");
        assert_eq!(tracer.snapshot().requests, u64::from(N));
    }

    #[test]
    fn parts_add_up() {
        let total: u64 = (0..3).map(|i| part(100, 3, i)).sum();
        assert_eq!(total, 100);
        assert_eq!(part(5, 0, 0), 0);
        assert!(is_error(0xC000_0022));
        assert!(!is_error(0xC000_0016));
        assert!(!is_error(0x8000_0006));
        assert!(!is_error(0));
    }
}
