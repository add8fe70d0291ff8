//! The metadata exchange of WS-Discovery: Windows POSTs a WS-Transfer
//! Get to the XAddr it was given (`http://ADDR:5357/UUID`) and lists the
//! computer by the GetResponse.
//!
//! Like the metrics endpoint, anyone who can reach the port can connect:
//! each exchange runs on a thread of its own, a few at once (more are
//! closed at once), with one deadline for all of it and a bounded
//! request, so a client that stalls or sends too much holds up nobody.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use copyless_wsd::{HTTP_PORT, MAX_MESSAGE};

use super::wsd::Device;
use super::Reach;
use crate::deadline::{time_left, write_by};

/// The request line and headers.
const MAX_HEAD: usize = 8192;
/// Time for a whole exchange.
const DEADLINE: Duration = Duration::from_secs(5);
/// Exchanges at once.
const MAX_EXCHANGES: usize = 8;
/// How long the accept loop rests when accept fails, rather than spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Listens on port 5357 of each address the SMB listeners are bound to
/// (wildcards included), each on a thread of its own. An address that
/// cannot be had is reported and left out.
pub fn start(reach: &Reach, device: Arc<Device>) {
    let busy = Arc::new(AtomicUsize::new(0));
    for ip in reach.bind_addrs() {
        let addr = SocketAddr::new(ip, HTTP_PORT);
        let started = TcpListener::bind(addr)
            .and_then(|listener| serve_on(listener, Arc::clone(&device), Arc::clone(&busy)));
        if let Err(e) = started {
            eprintln!(
                "copyless: discovery: WS-Discovery metadata cannot be served on {addr}: {e}; \
                 Windows will not list the server through {}",
                display(ip)
            );
        }
    }
}

fn display(ip: IpAddr) -> String {
    if ip.is_unspecified() {
        "any interface".to_string()
    } else {
        ip.to_string()
    }
}

fn serve_on(listener: TcpListener, device: Arc<Device>, busy: Arc<AtomicUsize>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("wsd-http".into())
        .spawn(move || loop {
            match listener.accept() {
                Ok((stream, _)) => dispatch(stream, &device, &busy),
                Err(_) => std::thread::sleep(ACCEPT_BACKOFF),
            }
        })?;
    Ok(())
}

/// One of the exchange places, given back when dropped.
struct Place(Arc<AtomicUsize>);

impl Place {
    fn take(busy: &Arc<AtomicUsize>) -> Option<Place> {
        busy.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_EXCHANGES).then_some(n + 1)
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

fn dispatch(stream: TcpStream, device: &Arc<Device>, busy: &Arc<AtomicUsize>) {
    // Over the cap the connection is just closed: WSDAPI tries again.
    let Some(place) = Place::take(busy) else {
        return;
    };
    let device = Arc::clone(device);
    let deadline = Instant::now() + DEADLINE;
    let _ = std::thread::Builder::new()
        .name("wsd-http-get".into())
        .spawn(move || {
            let _place = place;
            let _ = exchange(stream, &device, deadline);
        });
}

/// How far a request has come in.
#[derive(Debug, PartialEq, Eq)]
enum Framing {
    /// More bytes needed.
    Partial,
    /// The head is complete; the body (Content-Length bytes) follows it.
    Head {
        head_len: usize,
        body_len: usize,
        expect_continue: bool,
    },
    /// Answer with this status and close.
    Refuse(&'static str),
}

/// Reads the head of `buf`, if it is all there.
fn frame(buf: &[u8]) -> Framing {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > MAX_HEAD {
            Framing::Refuse("431 Request Header Fields Too Large")
        } else {
            Framing::Partial
        };
    };
    let Ok(head) = std::str::from_utf8(buf.get(..end).unwrap_or(&[])) else {
        return Framing::Refuse("400 Bad Request");
    };
    let mut body_len = None;
    let mut expect_continue = false;
    for line in head.split("\r\n").skip(1) {
        let Some((name, value)) = line.split_once(':') else {
            return Framing::Refuse("400 Bad Request");
        };
        let (name, value) = (name.trim(), value.trim());
        if name.eq_ignore_ascii_case("content-length") {
            match value.parse::<usize>() {
                Ok(n) if body_len.is_none() => body_len = Some(n),
                _ => return Framing::Refuse("400 Bad Request"),
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // WSDAPI always sends a length; chunks would only cost code.
            return Framing::Refuse("411 Length Required");
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue = value.eq_ignore_ascii_case("100-continue");
        }
    }
    match body_len {
        None => Framing::Refuse("411 Length Required"),
        Some(n) if n > MAX_MESSAGE => Framing::Refuse("413 Content Too Large"),
        Some(body_len) => Framing::Head {
            head_len: end + 4,
            body_len,
            expect_continue,
        },
    }
}

/// The status and SOAP body answering a complete request.
fn respond(device: &Device, head: &[u8], body: &[u8]) -> (&'static str, String) {
    let line = head.split(|&b| b == b'\r').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "POST" {
        return ("405 Method Not Allowed", String::new());
    }
    if path != device.path() {
        return ("404 Not Found", String::new());
    }
    match copyless_wsd::parse(body)
        .ok()
        .and_then(|m| device.answer_get(&m))
    {
        Some(answer) => ("200 OK", answer),
        None => ("400 Bad Request", String::new()),
    }
}

/// Time left until `deadline`, or TimedOut once it has passed (a zero
/// socket timeout would mean none at all).
fn exchange(mut stream: TcpStream, device: &Device, deadline: Instant) -> io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut continued = false;
    let (status, answer) = loop {
        match frame(&buf) {
            Framing::Refuse(status) => break (status, String::new()),
            Framing::Head {
                head_len,
                body_len,
                expect_continue,
            } => {
                let head = buf.get(..head_len).unwrap_or(&[]);
                if let Some(body) = buf.get(head_len..head_len + body_len) {
                    break respond(device, head, body);
                }
                if expect_continue && !continued {
                    write_by(&mut stream, b"HTTP/1.1 100 Continue\r\n\r\n", deadline)?;
                    continued = true;
                }
            }
            Framing::Partial => {}
        }
        stream.set_read_timeout(Some(time_left(deadline)?))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        // frame() refuses heads and bodies over their limits, so this
        // stays within MAX_HEAD + MAX_MESSAGE and a read's worth.
        buf.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
    };
    let mut reply = format!("HTTP/1.1 {status}\r\n");
    if !answer.is_empty() {
        reply.push_str("Content-Type: application/soap+xml; charset=utf-8\r\n");
    }
    reply.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        answer.len()
    ));
    write_by(&mut stream, reply.as_bytes(), deadline)?;
    write_by(&mut stream, answer.as_bytes(), deadline)
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_wsd::Uuid;
    use std::io::Write;

    fn device() -> Arc<Device> {
        Arc::new(Device::new(Uuid::random_from([9; 16]), "NAS", "WORKGROUP"))
    }

    fn get_body(device: &Device) -> String {
        format!(
            r#"<?xml version="1.0" encoding="utf-8"?>
<soap:Envelope xmlns:soap="{}" xmlns:wsa="{}"><soap:Header>
<wsa:To>urn:uuid:{}</wsa:To><wsa:Action>{}</wsa:Action>
<wsa:MessageID>urn:uuid:0000</wsa:MessageID></soap:Header><soap:Body/></soap:Envelope>"#,
            copyless_wsd::SOAP_NS,
            copyless_wsd::WSA_NS,
            &device.path()[1..],
            copyless_wsd::ACTION_GET
        )
    }

    fn post(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request).unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer
    }

    #[test]
    fn framing() {
        assert_eq!(frame(b"POST / HTTP/1.1\r\n"), Framing::Partial);
        assert_eq!(
            frame(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
            Framing::Head {
                head_len: 38,
                body_len: 5,
                expect_continue: false
            }
        );
        assert_eq!(
            frame(b"POST / HTTP/1.1\r\n\r\n"),
            Framing::Refuse("411 Length Required")
        );
        assert_eq!(
            frame(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
            Framing::Refuse("413 Content Too Large")
        );
        assert_eq!(
            frame(b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
            Framing::Refuse("400 Bad Request")
        );
        assert_eq!(
            frame(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Framing::Refuse("411 Length Required")
        );
        assert_eq!(
            frame(&vec![b'a'; MAX_HEAD + 1]),
            Framing::Refuse("431 Request Header Fields Too Large")
        );
    }

    #[test]
    fn answers_get_over_http() {
        let device = device();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        serve_on(listener, Arc::clone(&device), Arc::new(AtomicUsize::new(0))).unwrap();

        let request = |path: &str, body: &str| {
            format!(
                "POST {path} HTTP/1.1\r\nContent-Type: application/soap+xml\r\nHost: x\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        };
        let body = get_body(&device);
        let answer = post(addr, request(&device.path(), &body).as_bytes());
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert!(answer.contains("<pub:Computer>NAS/Workgroup:WORKGROUP</pub:Computer>"));

        let wrong_path = request("/other", &body);
        assert!(post(addr, wrong_path.as_bytes()).starts_with("HTTP/1.1 404"));
        let not_get = request(
            &device.path(),
            &body.replace(copyless_wsd::ACTION_GET, "urn:other"),
        );
        assert!(post(addr, not_get.as_bytes()).starts_with("HTTP/1.1 400"));
        let get = b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
        assert!(post(addr, get).starts_with("HTTP/1.1 405"));
        // A client that says it will send more than the limit is refused
        // before it sends any of it.
        let big = format!(
            "POST {} HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            device.path(),
            MAX_MESSAGE + 1
        );
        assert!(post(addr, big.as_bytes()).starts_with("HTTP/1.1 413"));
    }

    #[test]
    fn exchange_places_are_capped() {
        let busy = Arc::new(AtomicUsize::new(0));
        let places: Vec<Place> = (0..MAX_EXCHANGES)
            .map(|_| Place::take(&busy).unwrap())
            .collect();
        assert!(Place::take(&busy).is_none());
        drop(places);
        assert!(Place::take(&busy).is_some());
    }
}
