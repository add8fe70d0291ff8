//! The WS-Discovery target service: what makes the server appear in
//! Windows Explorer's Network folder, as wsdd does for Samba.
//!
//! One thread serves UDP on every covered IPv4 interface: it says Hello
//! on start and Bye on stop (multicast to 239.255.255.250:3702), answers
//! a Probe for a computer with a ProbeMatch and a Resolve for our
//! endpoint with a ResolveMatch. Windows then asks for the metadata over
//! HTTP on port 5357 ([`super::http`]), which names the computer and
//! its workgroup.
//!
//! Each interface address has two sockets: one bound to the group,
//! joined on that interface only (so that what arrives on it came over
//! that interface, and the reply can name that interface's address),
//! and one bound to the address and port 3702, from which replies and
//! announcements go out (SOAP-over-UDP answers from the port it was
//! asked on).
//!
//! Anyone on the link can send to the group, so: only senders on the
//! interface's own subnet are answered (as Windows' firewall rules for
//! network discovery do), a message id answered once is not answered
//! again (a client repeats each probe), replies are rate-limited, and
//! the queue of pending sends is bounded.

use std::collections::VecDeque;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use copyless_wsd::{
    self as wsd, Metadata, Request, Sequence, Uuid, HTTP_PORT, MAX_MESSAGE, MULTICAST_V4, UDP_PORT,
};
use rustix::event::{PollFd, PollFlags, Timespec};
use socket2::{Domain, InterfaceIndexOrAddress, Protocol, Socket, Type};

use super::{covered_v4_links, Link, Reach};

/// SOAP-over-UDP (Appendix I): a multicast message goes out four times,
/// a unicast one twice, the gaps starting at 50 to 250 ms and doubling
/// up to 500 ms.
const MULTICAST_REPEAT: u8 = 4;
const UNICAST_REPEAT: u8 = 2;
const FIRST_GAP_MS: (u64, u64) = (50, 250);
const MAX_GAP: Duration = Duration::from_millis(500);
/// How often the interfaces are looked at again, so that an address that
/// comes (DHCP, a cable plugged in) or goes after the start is followed.
const RESCAN: Duration = Duration::from_secs(30);
/// Message ids remembered to recognise repeats.
const RECENT_IDS: usize = 64;
/// Sends waiting for their time; past it, new replies are dropped.
const MAX_PENDING: usize = 256;
/// Replies allowed in a burst, and per second after it.
const REPLY_BURST: f64 = 32.0;
const REPLIES_PER_SEC: f64 = 16.0;
/// How long a stop may take to send its Byes.
const STOP_DEADLINE: Duration = Duration::from_secs(3);

/// Who we are to WS-Discovery; shared with the HTTP side.
pub struct Device {
    uuid: Uuid,
    endpoint: String,
    name: String,
    workgroup: String,
    /// Grows with every start (WS-Discovery 7): the start time.
    instance_id: u64,
    message_number: AtomicU64,
    ids: MessageIds,
}

impl Device {
    pub fn new(uuid: Uuid, name: &str, workgroup: &str) -> Device {
        let instance_id = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(1, |d| d.as_secs());
        Device {
            uuid,
            endpoint: uuid.urn(),
            name: name.to_string(),
            workgroup: workgroup.to_string(),
            instance_id,
            message_number: AtomicU64::new(1),
            ids: MessageIds::new(instance_id),
        }
    }

    /// The HTTP path of the metadata exchange.
    pub fn path(&self) -> String {
        format!("/{}", self.uuid)
    }

    fn xaddrs(&self, ip: Ipv4Addr) -> String {
        format!("http://{ip}:{HTTP_PORT}/{}", self.uuid)
    }

    fn sequence(&self) -> Sequence {
        Sequence {
            instance_id: self.instance_id,
            message_number: self.message_number.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The answer to a Get, or None if the message is not a Get.
    pub fn answer_get(&self, message: &wsd::Message) -> Option<String> {
        if message.request != Request::Get {
            return None;
        }
        let meta = Metadata {
            endpoint: &self.endpoint,
            friendly_name: &self.name,
            manufacturer: "copyless",
            model_name: "copyless",
            firmware_version: env!("CARGO_PKG_VERSION"),
            computer_name: &self.name,
            workgroup: &self.workgroup,
        };
        Some(wsd::get_response(
            &meta,
            &self.ids.next(),
            &message.message_id,
        ))
    }
}

/// Fresh `urn:uuid:` message ids without a system call each: a random
/// base with a counter mixed into it.
struct MessageIds {
    base: [u8; 16],
    next: AtomicU64,
}

impl MessageIds {
    fn new(fallback: u64) -> MessageIds {
        let mut base = [0u8; 16];
        if getrandom::fill(&mut base).is_err() {
            // Unique enough without randomness: the start time and pid.
            base[..8].copy_from_slice(&fallback.to_le_bytes());
            base[8..12].copy_from_slice(&std::process::id().to_le_bytes());
        }
        MessageIds {
            base,
            next: AtomicU64::new(0),
        }
    }

    fn next(&self) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut bytes = self.base;
        // Bytes 10 to 15: clear of the version and variant bits, which
        // would otherwise mask some of the counter's.
        for (b, c) in bytes[10..].iter_mut().zip(n.to_le_bytes()) {
            *b ^= c;
        }
        Uuid::random_from(bytes).urn()
    }
}

/// The running responder; [`Responder::stop`] says Bye.
pub struct Responder {
    wake: UnixDatagram,
    thread: JoinHandle<()>,
}

impl Responder {
    pub fn start(reach: Reach, device: Device) -> io::Result<Responder> {
        let device = Arc::new(device);
        // Before the first Hello, so that a client that reacts to it at
        // once finds the metadata.
        super::http::start(&reach, Arc::clone(&device));
        let (wake, woken) = UnixDatagram::pair()?;
        let mut seed = [0u8; 8];
        let _ = getrandom::fill(&mut seed);
        let mut udp = Udp {
            reach,
            device,
            links: Vec::new(),
            pending: Vec::new(),
            recent: VecDeque::new(),
            replies: Bucket::new(),
            // Xorshift needs a state other than zero.
            gap_state: u64::from_le_bytes(seed) | 1,
            stopping: false,
        };
        udp.rescan();
        if udp.links.is_empty() {
            eprintln!(
                "copyless: discovery: WS-Discovery: no interface up that the listeners cover \
                 yet; looking again every {} s",
                RESCAN.as_secs()
            );
        }
        let thread = std::thread::Builder::new()
            .name("wsd".into())
            .spawn(move || udp.run(&woken))?;
        Ok(Responder { wake, thread })
    }

    /// Sends Bye on every interface and ends the thread. (Dropping the
    /// responder does the same, without waiting.)
    pub fn stop(self) {
        if self.wake.send(&[1]).is_ok() {
            let _ = self.thread.join();
        }
    }
}

/// What [`Udp::poll`] found readable.
struct Ready {
    signalled: bool,
    /// Links by index, and whether their own socket (else the group's).
    sockets: Vec<(usize, bool)>,
}

/// One interface address's sockets.
struct Sockets {
    link: Link,
    /// Bound to the group, joined on this interface only.
    group: UdpSocket,
    /// Bound to the address and port 3702: what we send from.
    own: UdpSocket,
}

impl Sockets {
    fn open(link: Link) -> io::Result<Sockets> {
        let group = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        group.set_reuse_address(true)?;
        // Otherwise Linux delivers what any socket on the machine joined,
        // from every interface, to every socket bound to the port.
        group.set_multicast_all_v4(false)?;
        group.join_multicast_v4_n(&MULTICAST_V4, &InterfaceIndexOrAddress::Index(link.index))?;
        group.bind(&SocketAddrV4::new(MULTICAST_V4, UDP_PORT).into())?;
        group.set_nonblocking(true)?;

        let own = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        own.set_reuse_address(true)?;
        own.bind(&SocketAddrV4::new(link.addr, UDP_PORT).into())?;
        own.set_multicast_if_v4(&link.addr)?;
        // Link-local, and not back to ourselves.
        own.set_multicast_ttl_v4(1)?;
        own.set_multicast_loop_v4(false)?;
        own.set_nonblocking(true)?;
        Ok(Sockets {
            link,
            group: group.into(),
            own: own.into(),
        })
    }
}

/// A message to send, and how many more times.
struct Pending {
    due: Instant,
    /// The address of the link it goes out of.
    from: Ipv4Addr,
    to: SocketAddrV4,
    data: Arc<[u8]>,
    left: u8,
    gap: Duration,
}

/// A token bucket for replies.
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new() -> Bucket {
        Bucket {
            tokens: REPLY_BURST,
            at: Instant::now(),
        }
    }

    fn take(&mut self, now: Instant) -> bool {
        let refill = now.duration_since(self.at).as_secs_f64() * REPLIES_PER_SEC;
        self.tokens = (self.tokens + refill).min(REPLY_BURST);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

struct Udp {
    reach: Reach,
    device: Arc<Device>,
    links: Vec<Sockets>,
    pending: Vec<Pending>,
    recent: VecDeque<String>,
    replies: Bucket,
    /// For the random first gap of repeats.
    gap_state: u64,
    /// Saying Bye: nothing more is answered.
    stopping: bool,
}

impl Udp {
    fn run(mut self, woken: &UnixDatagram) {
        let mut buf = vec![0u8; MAX_MESSAGE + 1];
        let mut next_scan = Instant::now() + RESCAN;
        let mut stop_by: Option<Instant> = None;
        loop {
            let now = Instant::now();
            self.send_due(now);
            if let Some(deadline) = stop_by {
                if self.pending.is_empty() || now >= deadline {
                    return;
                }
            } else if now >= next_scan {
                self.rescan();
                next_scan = now + RESCAN;
            }
            let next = self
                .pending
                .iter()
                .map(|p| p.due)
                .chain([next_scan])
                .min()
                .unwrap_or(next_scan);
            let wait = Timespec::try_from(next.saturating_duration_since(now)).ok();
            let signal = stop_by.is_none().then_some(woken);
            let ready = match self.poll(signal, wait.as_ref()) {
                Ok(ready) => ready,
                // EINTR, or worse: wait a moment rather than spin.
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if ready.signalled {
                // The signal, or the other end closed: the responder was
                // stopped or dropped. Once is enough; it is not polled again.
                stop_by = Some(Instant::now() + STOP_DEADLINE);
                self.stopping = true;
                self.say_bye();
            }
            for (link, own) in ready.sockets {
                self.drain(link, own, &mut buf);
            }
        }
    }

    /// Waits for the stop signal (while it is watched) or a datagram.
    fn poll(&self, signal: Option<&UnixDatagram>, wait: Option<&Timespec>) -> io::Result<Ready> {
        let mut fds = Vec::with_capacity(1 + 2 * self.links.len());
        for s in &self.links {
            fds.push(PollFd::new(&s.group, PollFlags::IN));
            fds.push(PollFd::new(&s.own, PollFlags::IN));
        }
        if let Some(signal) = signal {
            fds.push(PollFd::new(signal, PollFlags::IN));
        }
        rustix::event::poll(&mut fds, wait)?;
        let readable = |fd: &PollFd<'_>| !fd.revents().is_empty();
        Ok(Ready {
            signalled: signal.is_some() && fds.last().is_some_and(readable),
            sockets: fds
                .chunks_exact(2)
                .enumerate()
                .flat_map(|(link, pair)| {
                    // Each link polls its group socket, then its own.
                    pair.iter()
                        .zip([false, true])
                        .filter(|(fd, _)| readable(fd))
                        .map(move |(_, own)| (link, own))
                })
                .collect(),
        })
    }

    /// Reads every datagram waiting on one of a link's sockets.
    fn drain(&mut self, link: usize, own: bool, buf: &mut [u8]) {
        let Some(sockets) = self.links.get(link) else {
            return;
        };
        let socket = if own { &sockets.own } else { &sockets.group };
        let mut received = Vec::new();
        // Bounded: what is read in one turn is what fit in the socket's
        // receive buffer, and each is dropped as soon as it is handled.
        while let Ok((n, from)) = socket.recv_from(buf) {
            if let (SocketAddr::V4(from), Some(data)) = (from, buf.get(..n)) {
                if sockets.link.on_link(*from.ip()) {
                    received.push((from, wsd::parse(data)));
                }
            }
            if received.len() >= 64 {
                break;
            }
        }
        let link = sockets.link.clone();
        for (from, message) in received {
            if let Ok(message) = message {
                self.answer(&link, from, message);
            }
        }
    }

    fn answer(&mut self, link: &Link, from: SocketAddrV4, message: wsd::Message) {
        let build = match &message.request {
            Request::Probe(probe) if probe.matches_computer() => wsd::probe_matches,
            Request::Resolve { endpoint }
                if endpoint.eq_ignore_ascii_case(&self.device.endpoint) =>
            {
                wsd::resolve_matches
            }
            _ => return,
        };
        // Only what would be answered is remembered, so that other
        // traffic on the group cannot push those ids out.
        if self.stopping || self.recent.contains(&message.message_id) {
            return;
        }
        if self.recent.len() == RECENT_IDS {
            self.recent.pop_front();
        }
        self.recent.push_back(message.message_id.clone());
        let now = Instant::now();
        if !self.replies.take(now) {
            return;
        }
        let device = &self.device;
        let reply = build(
            &device.endpoint,
            &device.xaddrs(link.addr),
            &device.ids.next(),
            &message.message_id,
            device.sequence(),
        );
        self.queue(now, link.addr, from, reply, UNICAST_REPEAT);
    }

    fn say_hello(&mut self, link: &Link) {
        let device = &self.device;
        let hello = wsd::hello(
            &device.endpoint,
            &device.xaddrs(link.addr),
            &device.ids.next(),
            device.sequence(),
        );
        let group = SocketAddrV4::new(MULTICAST_V4, UDP_PORT);
        self.queue(Instant::now(), link.addr, group, hello, MULTICAST_REPEAT);
    }

    fn say_bye(&mut self) {
        // Whatever was still to be repeated no longer matters.
        self.pending.clear();
        let bye = wsd::bye(
            &self.device.endpoint,
            &self.device.ids.next(),
            self.device.sequence(),
        );
        let group = SocketAddrV4::new(MULTICAST_V4, UDP_PORT);
        let now = Instant::now();
        let addrs: Vec<Ipv4Addr> = self.links.iter().map(|s| s.link.addr).collect();
        for addr in addrs {
            self.queue(now, addr, group, bye.clone(), MULTICAST_REPEAT);
        }
        self.send_due(now);
    }

    fn queue(&mut self, now: Instant, from: Ipv4Addr, to: SocketAddrV4, text: String, times: u8) {
        if self.pending.len() >= MAX_PENDING {
            return;
        }
        let gap = self.first_gap();
        self.pending.push(Pending {
            due: now,
            from,
            to,
            data: Arc::from(text.into_bytes()),
            left: times,
            gap,
        });
    }

    /// A gap of 50 to 250 ms, from a xorshift generator: it need not be
    /// unpredictable, only differ between servers that start together.
    fn first_gap(&mut self) -> Duration {
        let mut x = self.gap_state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.gap_state = x;
        let (low, high) = FIRST_GAP_MS;
        Duration::from_millis(low + x % (high - low + 1))
    }

    /// Sends what is due, and schedules the repeats.
    fn send_due(&mut self, now: Instant) {
        let links = &self.links;
        self.pending.retain_mut(|p| {
            if p.due > now {
                return true;
            }
            if let Some(s) = links.iter().find(|s| s.link.addr == p.from) {
                // A failed send (the interface went away, a full buffer)
                // is what repeats are for.
                let _ = s.own.send_to(&p.data, p.to);
            }
            p.left = p.left.saturating_sub(1);
            p.due = now + p.gap;
            p.gap = (p.gap * 2).min(MAX_GAP);
            p.left > 0
        });
    }

    /// Follows the interfaces: opens sockets (and says Hello) on new
    /// addresses, closes those of addresses that went.
    fn rescan(&mut self) {
        let Ok(now) = covered_v4_links(&self.reach) else {
            return;
        };
        self.links.retain(|s| {
            let kept = now.contains(&s.link);
            if !kept {
                eprintln!(
                    "copyless: discovery: WS-Discovery: {} ({}) is gone",
                    s.link.name, s.link.addr
                );
            }
            kept
        });
        for link in now {
            if self.links.iter().any(|s| s.link == link) {
                continue;
            }
            match Sockets::open(link.clone()) {
                Ok(sockets) => {
                    eprintln!(
                        "copyless: discovery: WS-Discovery on {} ({}), metadata at {}",
                        link.name,
                        link.addr,
                        self.device.xaddrs(link.addr)
                    );
                    self.links.push(sockets);
                    self.say_hello(&link);
                }
                Err(e) => eprintln!(
                    "copyless: discovery: WS-Discovery: cannot use {} ({}): {e}",
                    link.name, link.addr
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_differ() {
        let ids = MessageIds::new(1);
        let all: std::collections::HashSet<String> = (0..1000).map(|_| ids.next()).collect();
        assert_eq!(all.len(), 1000);
        let a = ids.next();
        assert!(a.starts_with("urn:uuid:") && a.len() == 45, "{a}");
    }

    #[test]
    fn replies_are_rate_limited() {
        let mut bucket = Bucket::new();
        let now = bucket.at;
        let granted = (0..100).filter(|_| bucket.take(now)).count();
        assert_eq!(granted, REPLY_BURST as usize);
        // A second later there is room again, but only for so many.
        let later = now + Duration::from_secs(1);
        let granted = (0..100).filter(|_| bucket.take(later)).count();
        assert_eq!(granted, REPLIES_PER_SEC as usize);
    }

    #[test]
    fn get_is_answered_with_the_computer_name() {
        let device = Device::new(Uuid::random_from([7; 16]), "NAS", "HOME");
        let get = format!(
            r#"<s:Envelope xmlns:s="{}" xmlns:a="{}"><s:Header>
            <a:To>{}</a:To><a:Action>{}</a:Action><a:MessageID>urn:uuid:q</a:MessageID>
            </s:Header><s:Body/></s:Envelope>"#,
            wsd::SOAP_NS,
            wsd::WSA_NS,
            device.endpoint,
            wsd::ACTION_GET
        );
        let message = wsd::parse(get.as_bytes()).unwrap();
        let answer = device.answer_get(&message).unwrap();
        assert!(answer.contains("<pub:Computer>NAS/Workgroup:HOME</pub:Computer>"));
        assert!(answer.contains("<wsa:RelatesTo>urn:uuid:q</wsa:RelatesTo>"));
        let probe = get.replace(wsd::ACTION_GET, wsd::ACTION_RESOLVE);
        let probe = probe.replace("<s:Body/>", "<s:Body><d:Resolve xmlns:d=\"x\"/></s:Body>");
        assert!(wsd::parse(probe.as_bytes())
            .map(|m| device.answer_get(&m).is_none())
            .unwrap_or(true));
    }
}
