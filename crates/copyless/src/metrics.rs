//! The Prometheus endpoint: a small HTTP/1.1 listener of our own that
//! answers `GET /metrics` with the tracer's counters and histograms, and
//! serves the live dashboard (`/`, `/report.json`, `/static/...`, see
//! `dashboard`) beside it.
//!
//! Anyone who can reach the port can connect, so one scraper must not hold
//! up another: each connection is served on a thread of its own, with a cap
//! on how many at once, and every exchange has one deadline for all of it
//! (a per-read timeout would let a client that trickles a byte at a time
//! keep its thread for ever).

use std::borrow::Cow;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use copyless_core::status::ServerStatus;
use copyless_core::Server;
use copyless_trace::prometheus::{self, ClientLabels, NasGauges, ShareSpace};
use copyless_trace::Tracer;

use crate::dashboard::{self, Dashboard};
use crate::deadline::{time_left, write_by};

/// The most of a request we read: the request line and headers.
const MAX_HEAD: u64 = 8192;
/// Time for a whole exchange: reading the request and sending the answer.
const DEADLINE: Duration = Duration::from_secs(10);
/// Scrapes served at once; a connection beyond is refused at once.
const MAX_SCRAPES: usize = 16;
/// How long the accept loop rests when accept fails (out of descriptors,
/// say), rather than spinning.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What the endpoint serves, and how patiently.
struct Endpoint {
    tracer: Arc<Tracer>,
    labels: ClientLabels,
    dashboard: Arc<Dashboard>,
    deadline: Duration,
    max_scrapes: usize,
    busy: Arc<AtomicUsize>,
    /// What the server holds now (sessions, open files, room per share).
    nas: Option<NasSource>,
}

/// What the server holds now: its status board (sessions and open
/// files, as `copyless status` shows them) and the room on each share.
#[derive(Debug, Clone, Default)]
pub struct NasView {
    pub status: ServerStatus,
    pub shares: Vec<ShareSpace>,
}

impl NasView {
    /// The gauges of `/metrics`: sessions (each counted once, however many
    /// channels it has), opens, and the room on each share.
    pub fn gauges(&self) -> NasGauges {
        NasGauges {
            sessions: self.session_count(),
            open_files: self.status.opens.len() as u64,
            shares: self.shares.clone(),
        }
    }

    pub fn session_count(&self) -> u64 {
        let mut sessions: Vec<u64> = self
            .status
            .connections
            .iter()
            .flat_map(|c| c.sessions.iter().map(|s| s.id))
            .collect();
        sessions.sort_unstable();
        sessions.dedup();
        sessions.len() as u64
    }
}

/// Reads the [`NasView`] at each scrape, and each second for the
/// dashboard.
pub type NasSource = Arc<dyn Fn() -> NasView + Send + Sync>;

/// The view of `server`: its status board, and the room on each
/// configured share's filesystem (home shares, named after their users,
/// are left out).
pub fn nas_source(server: Arc<Server>) -> NasSource {
    Arc::new(move || {
        let shares = server
            .shares
            .all()
            .into_iter()
            .filter(|(_, s)| s.owner.is_none())
            .filter_map(|(_, s)| {
                let fs = s.vfs.fs_stat().ok()?;
                let bytes = |blocks: u64| blocks.saturating_mul(u64::from(fs.block_size));
                Some(ShareSpace {
                    name: s.name.clone(),
                    size: bytes(fs.total_blocks),
                    free: bytes(fs.free_blocks),
                    available: bytes(fs.avail_blocks),
                })
            })
            .collect();
        NasView {
            status: server.status(),
            shares,
        }
    })
}

/// Binds `addr` and serves it from a thread of its own; returns the bound
/// address (the real port when 0 was asked for).
pub fn start(
    addr: SocketAddr,
    tracer: Arc<Tracer>,
    labels: ClientLabels,
    nas: NasSource,
) -> io::Result<SocketAddr> {
    let dashboard = Dashboard::start(
        Arc::clone(&tracer),
        names_shown(addr, labels),
        Some(Arc::clone(&nas)),
    )?;
    start_endpoint(
        addr,
        Endpoint {
            tracer,
            labels,
            dashboard,
            deadline: DEADLINE,
            max_scrapes: MAX_SCRAPES,
            busy: Arc::new(AtomicUsize::new(0)),
            nas: Some(nas),
        },
    )
}

fn start_endpoint(addr: SocketAddr, endpoint: Endpoint) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let endpoint = Arc::new(endpoint);
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || loop {
            match listener.accept() {
                Ok((stream, _)) => dispatch(&endpoint, stream),
                Err(_) => std::thread::sleep(ACCEPT_BACKOFF),
            }
        })?;
    Ok(local)
}

fn is_loopback(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// Whether the dashboard shows user names (of sessions, open files and
/// failed logons) and the paths of open files: when only this machine can
/// reach it, or when `[metrics] user_labels = true` put user names in the
/// labels for all who can. Client addresses are shown either way, as the
/// labels of `/metrics` carry them.
pub fn names_shown(addr: SocketAddr, labels: ClientLabels) -> bool {
    is_loopback(addr) || labels == ClientLabels::AddressAndUser
}

/// What to say on stderr when the endpoint listens beyond this machine.
pub fn exposure_warning(addr: SocketAddr) -> Option<String> {
    (!is_loopback(addr)).then(|| {
        format!(
            "metrics on {addr} have no authentication; anyone who can reach it sees \
             per-share and per-client figures"
        )
    })
}

/// One of the endpoint's scrape places, given back when dropped.
struct Place(Arc<AtomicUsize>);

impl Place {
    fn take(busy: &Arc<AtomicUsize>, max: usize) -> Option<Place> {
        busy.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()
        .map(|_| Place(Arc::clone(busy)))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn dispatch(endpoint: &Arc<Endpoint>, stream: TcpStream) {
    let Some(place) = Place::take(&endpoint.busy, endpoint.max_scrapes) else {
        refuse(stream);
        return;
    };
    let deadline = Instant::now() + endpoint.deadline;
    let endpoint = Arc::clone(endpoint);
    // If the thread cannot be made, the closure (stream and place with it)
    // is dropped: the client sees the connection closed.
    let _ = std::thread::Builder::new()
        .name("metrics-scrape".into())
        .spawn(move || {
            let _place = place;
            let _ = serve(stream, &endpoint, deadline);
        });
}

/// Answers 503 without waiting on the client: the accept loop must never
/// block on one. The few bytes fit any socket buffer, so one
/// non-blocking write sends them or nothing is lost worth waiting for.
fn refuse(mut stream: TcpStream) {
    const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
        Content-Length: 24\r\nRetry-After: 1\r\nConnection: close\r\n\r\n\
        too many scrapes at once";
    if stream.set_nonblocking(true).is_ok() {
        let _ = stream.write(BUSY);
    }
}

/// An HTTP request head, once it is complete.
fn request_head(head: &[u8]) -> Option<&str> {
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    std::str::from_utf8(head.get(..end)?).ok()
}

/// Prometheus itself asks for OpenMetrics; anything else gets the older
/// text format, which every Prometheus parser reads.
fn wants_openmetrics(head: &str) -> bool {
    head.lines().skip(1).any(|h| {
        h.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept")
                && value.contains("application/openmetrics-text")
        })
    })
}

/// The request line's method and path (without a query), and the head.
struct Request<'a> {
    method: &'a str,
    path: &'a str,
    head: &'a str,
}

impl<'a> Request<'a> {
    fn parse(head: &'a str) -> Request<'a> {
        let line = head.lines().next().unwrap_or("");
        let mut parts = line.split(' ');
        let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let path = target.split('?').next().unwrap_or("");
        Request { method, path, head }
    }

    /// The value of header `name`, if sent.
    fn header(&self, name: &str) -> Option<&'a str> {
        self.head.lines().skip(1).find_map(|h| {
            let (n, value) = h.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

/// Sent with every answer. The page may run only its own scripts and
/// styles and talk only to this endpoint; nothing may frame it, and no
/// answer is taken for another type than it says it is.
const SECURITY_HEADERS: &str = "X-Content-Type-Options: nosniff\r\n\
    Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'\r\n\
    Referrer-Policy: no-referrer\r\n";

const NOT_MODIFIED: &str = "304 Not Modified";

/// What to answer a request.
struct Response {
    status: &'static str,
    content_type: &'static str,
    cache_control: &'static str,
    /// Header lines beyond the ones every answer has, each ending in CRLF.
    extra: String,
    body: Cow<'static, [u8]>,
}

impl Response {
    fn new(
        status: &'static str,
        content_type: &'static str,
        cache_control: &'static str,
        body: impl Into<Cow<'static, [u8]>>,
    ) -> Response {
        Response {
            status,
            content_type,
            cache_control,
            extra: String::new(),
            body: body.into(),
        }
    }

    /// A fresh answer each time, never to be kept.
    fn live(content_type: &'static str, body: impl Into<Cow<'static, [u8]>>) -> Response {
        Response::new("200 OK", content_type, "no-store", body)
    }

    fn text(status: &'static str, body: &'static str) -> Response {
        Response::new(status, "text/plain", "no-store", body.as_bytes())
    }

    /// One of the page's files. The same bytes until the binary changes:
    /// a browser may keep them but asks each time whether they still hold
    /// (no-cache with an entity tag), so an upgrade shows at once.
    fn asset(request: &Request, content_type: &'static str, body: &'static [u8]) -> Response {
        let tag = dashboard::etag(body);
        let status = if request.header("if-none-match") == Some(tag.as_str()) {
            NOT_MODIFIED
        } else {
            "200 OK"
        };
        let mut response = Response::new(status, content_type, "no-cache", body);
        response.extra = format!("ETag: {tag}\r\n");
        response
    }

    /// The head, with the length of the body (sent or not).
    fn head(&self) -> String {
        format!(
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Cache-Control: {}\r\n{}{SECURITY_HEADERS}Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len(),
            self.cache_control,
            self.extra,
        )
    }
}

/// The answer to a request (HEAD is answered as GET; the body is left out
/// when sending).
fn respond(request: &Request, endpoint: &Endpoint) -> Response {
    if !matches!(request.method, "GET" | "HEAD") {
        let mut response = Response::text("405 Method Not Allowed", "only GET is served\n");
        response.extra = "Allow: GET, HEAD\r\n".into();
        return response;
    }
    let (tracer, labels) = (&endpoint.tracer, endpoint.labels);
    let nas = || endpoint.nas.as_ref().map(|read| read().gauges());
    match request.path {
        "/metrics" if wants_openmetrics(request.head) => Response::live(
            prometheus::CONTENT_TYPE,
            prometheus::encode(&tracer.snapshot(), labels, nas().as_ref()).into_bytes(),
        ),
        "/metrics" => Response::live(
            prometheus::CLASSIC_CONTENT_TYPE,
            prometheus::encode_classic(&tracer.snapshot(), labels, nas().as_ref()).into_bytes(),
        ),
        "/report.json" => Response::live("application/json", endpoint.dashboard.document()),
        "/history.json" => Response::live("application/json", endpoint.dashboard.minutes()),
        path => match dashboard::asset(path) {
            Some((content_type, body)) => Response::asset(request, content_type, body),
            None => Response::text("404 Not Found", "try /metrics or /\n"),
        },
    }
}

/// Time left until `deadline`, or TimedOut once it has passed (a zero
/// socket timeout would mean no timeout at all).
fn serve(mut stream: TcpStream, endpoint: &Endpoint, deadline: Instant) -> io::Result<()> {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    let text = loop {
        if let Some(text) = request_head(&head) {
            break text.to_string();
        }
        stream.set_read_timeout(Some(time_left(deadline)?))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 || head.len() as u64 + n as u64 > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
    };
    let request = Request::parse(&text);
    let response = respond(&request, endpoint);
    write_by(&mut stream, response.head().as_bytes(), deadline)?;
    // HEAD is answered as GET without the body, and so is a 304.
    if request.method != "HEAD" && response.status != NOT_MODIFIED {
        write_by(&mut stream, &response.body, deadline)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::net::IpAddr;

    fn endpoint_with(
        tracer: Arc<Tracer>,
        labels: ClientLabels,
        deadline: Duration,
        max_scrapes: usize,
    ) -> Endpoint {
        Endpoint {
            dashboard: Dashboard::start(Arc::clone(&tracer), false, None).unwrap(),
            tracer,
            labels,
            deadline,
            max_scrapes,
            busy: Arc::new(AtomicUsize::new(0)),
            nas: None,
        }
    }

    fn endpoint(tracer: Arc<Tracer>, deadline: Duration, max_scrapes: usize) -> SocketAddr {
        start_endpoint(
            "127.0.0.1:0".parse().unwrap(),
            endpoint_with(tracer, ClientLabels::Address, deadline, max_scrapes),
        )
        .unwrap()
    }

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        // The server may reset a connection it refused to read further.
        let _ = s.read_to_string(&mut answer);
        answer
    }

    /// Connections (id, the ids of their sessions; one may be a channel
    /// of another's) and `opens` opens of the first session.
    pub(crate) fn status_of(input: &[(u64, &[u64])], opens: usize) -> ServerStatus {
        use copyless_core::status::{ConnectionStatus, OpenStatus, SessionStatus};
        let connections = input
            .iter()
            .map(|&(id, sessions)| ConnectionStatus {
                id,
                client: SocketAddr::from(([10, 0, 0, id as u8], 50000)),
                dialect: 0x0311,
                sessions: sessions
                    .iter()
                    .map(|&sid| SessionStatus {
                        id: sid,
                        user: format!("user{sid}"),
                        anonymous: false,
                        guest: false,
                        kerberos: false,
                        signing_required: true,
                        encrypted: false,
                        trees: vec!["data".into()],
                    })
                    .collect(),
            })
            .collect();
        let first = input
            .first()
            .and_then(|(_, sessions)| sessions.first().copied())
            .unwrap_or(0);
        let opens = (0..opens)
            .map(|i| OpenStatus {
                share: "data".into(),
                path: format!("dir/file{i:03}.txt"),
                is_dir: false,
                session: first,
                access: 0x0012_0089,
                share_access: 7,
                delete_pending: false,
                disconnected: false,
                oplock: 0,
                lease: None,
                locks: Vec::new(),
            })
            .collect();
        ServerStatus { connections, opens }
    }

    const SCRAPE: &str = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";

    #[test]
    fn serves_metrics_over_http() {
        let tracer = Tracer::new(vec!["data".into()], true);
        let nas: NasSource = Arc::new(|| NasView {
            status: status_of(&[(1, &[7, 8]), (2, &[8])], 5),
            shares: vec![ShareSpace {
                name: "data".into(),
                size: 4096,
                free: 2048,
                available: 1024,
            }],
        });
        let addr = start(
            "127.0.0.1:0".parse().unwrap(),
            tracer,
            ClientLabels::Address,
            nas,
        )
        .unwrap();
        let answer = get(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\n\
             accept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n",
        );
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("application/openmetrics-text"), "{answer}");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        assert!(body.contains("copyless_tracing_enabled 1"), "{body}");
        for line in [
            "copyless_sessions 2",
            "copyless_open_files 5",
            "copyless_share_size_bytes{share=\"data\"} 4096",
            "copyless_share_free_bytes{share=\"data\"} 2048",
            "copyless_share_available_bytes{share=\"data\"} 1024",
        ] {
            assert!(body.lines().any(|l| l.starts_with(line)), "{line}\n{body}");
        }
        assert!(body.ends_with("# EOF\n"));

        let answer = get(addr, "GET /metrics HTTP/1.1\r\nAccept: */*\r\n\r\n");
        assert!(answer.contains("text/plain; version=0.0.4"), "{answer}");
        assert!(answer.contains("# TYPE copyless_requests_total counter"));
        assert!(!answer.contains("# EOF"));

        let answer = get(addr, "GET /nothing HTTP/1.0\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        let answer = get(addr, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
        // A head that never ends is cut off without an answer.
        let junk = "x".repeat(9000);
        assert_eq!(get(addr, &junk), "");
    }

    /// The head of an answer, as (status line, headers by lower-case name).
    fn head_of(answer: &str) -> (String, std::collections::HashMap<String, String>) {
        let head = answer.split("\r\n\r\n").next().unwrap();
        let mut lines = head.lines();
        let status = lines.next().unwrap().to_string();
        let headers = lines
            .filter_map(|l| l.split_once(": "))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
            .collect();
        (status, headers)
    }

    #[test]
    fn serves_the_dashboard() {
        let addr = endpoint(Tracer::new(vec![], true), DEADLINE, MAX_SCRAPES);
        let csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
        for (path, content_type) in [
            ("/", "text/html; charset=utf-8"),
            ("/?refresh=1", "text/html; charset=utf-8"),
            ("/static/dashboard.js", "text/javascript; charset=utf-8"),
            ("/static/dashboard.css", "text/css; charset=utf-8"),
            (
                "/static/uPlot.iife.min.js",
                "text/javascript; charset=utf-8",
            ),
            ("/static/uPlot.min.css", "text/css; charset=utf-8"),
            ("/static/favicon.svg", "image/svg+xml"),
        ] {
            let answer = get(addr, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
            let (status, headers) = head_of(&answer);
            assert_eq!(status, "HTTP/1.1 200 OK", "{path}");
            assert_eq!(headers["content-type"], content_type, "{path}");
            assert_eq!(headers["cache-control"], "no-cache", "{path}");
            assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
            assert_eq!(headers["content-security-policy"], csp, "{path}");
            let body = answer.split_once("\r\n\r\n").unwrap().1;
            assert_eq!(headers["content-length"], body.len().to_string(), "{path}");
            let bare = path.split('?').next().unwrap();
            assert_eq!(body.as_bytes(), dashboard::asset(bare).unwrap().1, "{path}");

            // Asked again with its tag: not modified, no body.
            let tag = &headers["etag"];
            let again = get(
                addr,
                &format!("GET {path} HTTP/1.1\r\nIf-None-Match: {tag}\r\n\r\n"),
            );
            assert!(
                again.starts_with("HTTP/1.1 304 Not Modified\r\n"),
                "{again}"
            );
            assert!(again.ends_with("\r\n\r\n"), "{again}");
            let stale = get(
                addr,
                &format!("GET {path} HTTP/1.1\r\nIf-None-Match: \"0\"\r\n\r\n"),
            );
            assert!(stale.starts_with("HTTP/1.1 200 OK\r\n"), "{path}");
        }

        let answer = get(addr, "GET /report.json HTTP/1.1\r\n\r\n");
        let (status, headers) = head_of(&answer);
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["cache-control"], "no-store");
        let body = answer.split_once("\r\n\r\n").unwrap().1;
        let doc: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(doc["report"]["enabled"], true);

        // HEAD: the same head, no body.
        let answer = get(addr, "HEAD / HTTP/1.1\r\n\r\n");
        let (status, headers) = head_of(&answer);
        assert_eq!(status, "HTTP/1.1 200 OK");
        let page = dashboard::asset("/").unwrap().1;
        assert_eq!(headers["content-length"], page.len().to_string());
        assert!(answer.ends_with("\r\n\r\n"), "{answer}");
        let answer = get(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.ends_with("\r\n\r\n"), "{answer}");

        for path in [
            "/static/",
            "/static/../dashboard.rs",
            "/index.html",
            "/favicon.ico",
        ] {
            let answer = get(addr, &format!("GET {path} HTTP/1.1\r\n\r\n"));
            let (status, headers) = head_of(&answer);
            assert_eq!(status, "HTTP/1.1 404 Not Found", "{path}");
            assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        }
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "get"] {
            let answer = get(addr, &format!("{method} / HTTP/1.1\r\n\r\n"));
            let (status, headers) = head_of(&answer);
            assert_eq!(status, "HTTP/1.1 405 Method Not Allowed", "{method}");
            assert_eq!(headers["allow"], "GET, HEAD", "{method}");
        }
    }

    #[test]
    fn slow_scrapers_do_not_hold_up_others() {
        // A deadline far beyond the patience of the scrape below: served
        // one after the other, it would wait on the two stalled ones.
        let addr = endpoint(
            Tracer::new(vec![], true),
            Duration::from_secs(600),
            MAX_SCRAPES,
        );
        let mut stalled = Vec::new();
        for _ in 0..2 {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
            stalled.push(s);
        }
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        s.write_all(SCRAPE.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("copyless_uptime_seconds"), "{answer}");
        drop(stalled);
    }

    #[test]
    fn connections_beyond_the_cap_are_refused_at_once() {
        let addr = endpoint(Tracer::new(vec![], true), Duration::from_secs(600), 2);
        let holders: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
        let mut third = TcpStream::connect(addr).unwrap();
        third
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut answer = String::new();
        third.read_to_string(&mut answer).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{answer}"
        );
        assert!(
            answer.ends_with("\r\n\r\ntoo many scrapes at once"),
            "{answer}"
        );

        // Their places come back once the holders go.
        drop(holders);
        let served = (0..600).any(|_| {
            let answer = get(addr, SCRAPE);
            if answer.starts_with("HTTP/1.1 200 OK\r\n") {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
            false
        });
        assert!(served, "no place freed after the holders closed");
    }

    #[test]
    fn the_deadline_ends_a_trickling_client() {
        let addr = endpoint(Tracer::new(vec![], true), Duration::from_millis(300), 4);
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        // A header that never ends, one byte at a time: each byte comes
        // well within any per-read timeout, so only a deadline for the
        // whole request ends it. Bounded so that a failure cannot hang.
        let closed = (0..2000).any(|_| {
            if s.write_all(b"x").is_err() {
                return true;
            }
            let mut byte = [0u8; 1];
            match s.read(&mut byte) {
                Ok(0) => true,
                Ok(_) => panic!("an answer to a request that never ended"),
                Err(e) => !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ),
            }
        });
        assert!(closed, "the server kept reading a request that never ends");
    }

    #[test]
    fn user_names_stay_out_of_labels_unless_configured() {
        let tracer = Tracer::new(vec!["data".into()], true);
        {
            let mut recorder = tracer
                .connection(IpAddr::from([10, 0, 0, 7]))
                .expect("tracing is on");
            let request = copyless_trace::Request {
                command: 5,
                message_id: 7,
                status: 0,
                share: None,
                user: Some("alice"),
            };
            recorder.frame(&copyless_trace::FrameTimes::default(), [request]);
        }
        let request = Request::parse("GET /metrics HTTP/1.1\r\nAccept: */*");
        let body_of = |labels| {
            let endpoint = endpoint_with(Arc::clone(&tracer), labels, DEADLINE, MAX_SCRAPES);
            String::from_utf8(respond(&request, &endpoint).body.into_owned()).unwrap()
        };
        let body = body_of(ClientLabels::Address);
        assert!(!body.contains("alice"), "{body}");
        assert!(
            body.contains("copyless_client_requests_total{address=\"10.0.0.7\"}"),
            "{body}"
        );
        let body = body_of(ClientLabels::AddressAndUser);
        assert!(
            body.contains("{address=\"10.0.0.7\",user=\"alice\"}"),
            "{body}"
        );
    }

    #[test]
    fn names_are_shown_on_loopback_or_when_labels_carry_them() {
        for (addr, labels, shown) in [
            ("127.0.0.1:9445", ClientLabels::Address, true),
            ("[::1]:9445", ClientLabels::Address, true),
            ("0.0.0.0:9445", ClientLabels::Address, false),
            ("192.168.1.5:9445", ClientLabels::Address, false),
            ("0.0.0.0:9445", ClientLabels::AddressAndUser, true),
            ("127.0.0.1:9445", ClientLabels::AddressAndUser, true),
        ] {
            assert_eq!(names_shown(addr.parse().unwrap(), labels), shown, "{addr}");
        }
    }

    #[test]
    fn warns_when_listening_beyond_loopback() {
        for quiet in ["127.0.0.1:9445", "[::1]:9445", "[::ffff:127.0.0.1]:9445"] {
            assert_eq!(exposure_warning(quiet.parse().unwrap()), None, "{quiet}");
        }
        for loud in ["0.0.0.0:9445", "192.168.1.5:9445", "[::]:9445"] {
            let warning = exposure_warning(loud.parse().unwrap()).expect(loud);
            assert!(warning.starts_with(&format!("metrics on {loud} have no")));
            assert!(warning.contains("per-share and per-client figures"));
        }
    }

    #[test]
    fn request_heads() {
        assert_eq!(
            request_head(b"GET /metrics HTTP/1.1\r\nA: b\r\n\r\n"),
            Some("GET /metrics HTTP/1.1\r\nA: b")
        );
        assert_eq!(request_head(b"GET /metrics HTTP/1.1\r\n"), None);
        assert_eq!(request_head(b"\xff\xfe\r\n\r\n"), None);
        assert!(wants_openmetrics(
            "GET / HTTP/1.1\r\nACCEPT: application/openmetrics-text"
        ));
        assert!(!wants_openmetrics("GET / HTTP/1.1\r\nAccept: text/plain"));
        // The request line is not a header.
        assert!(!wants_openmetrics(
            "GET /application/openmetrics-text HTTP/1.1"
        ));
    }
}
