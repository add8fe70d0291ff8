//! The Prometheus endpoint: a small HTTP/1.1 listener of our own that
//! answers `GET /metrics` with the tracer's counters and histograms.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use copyless_trace::{prometheus, Tracer};

/// The most of a request we read: the request line and headers.
const MAX_HEAD: u64 = 8192;
/// A scraper that stalls is dropped after this long.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds `addr` and serves it on a thread of its own; returns the bound
/// address (the real port when 0 was asked for).
pub fn start(addr: SocketAddr, tracer: Arc<Tracer>) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &tracer);
            }
        })?;
    Ok(local)
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

/// Status line, content type and body for a request head.
fn respond(head: &str, tracer: &Tracer) -> (&'static str, &'static str, String) {
    let line = head.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") if wants_openmetrics(head) => (
            "200 OK",
            prometheus::CONTENT_TYPE,
            prometheus::encode(&tracer.snapshot()),
        ),
        ("GET", "/metrics") => (
            "200 OK",
            prometheus::CLASSIC_CONTENT_TYPE,
            prometheus::encode_classic(&tracer.snapshot()),
        ),
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".into()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET is served\n".into(),
        ),
    }
}

fn serve(mut stream: TcpStream, tracer: &Tracer) -> io::Result<()> {
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    let text = loop {
        if let Some(text) = request_head(&head) {
            break text.to_string();
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 || head.len() as u64 + n as u64 > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(chunk.get(..n).unwrap_or(&[]));
    };
    let (status, content_type, body) = respond(&text, tracer);
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(reply.as_bytes())?;
    stream.write_all(body.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        // The server may reset a connection it refused to read further.
        let _ = s.read_to_string(&mut answer);
        answer
    }

    #[test]
    fn serves_metrics_over_http() {
        let tracer = Tracer::new(vec!["data".into()], true);
        let addr = start("127.0.0.1:0".parse().unwrap(), tracer).unwrap();
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
        assert!(body.ends_with("# EOF\n"));

        let answer = get(addr, "GET /metrics HTTP/1.1\r\nAccept: */*\r\n\r\n");
        assert!(answer.contains("text/plain; version=0.0.4"), "{answer}");
        assert!(answer.contains("# TYPE copyless_requests_total counter"));
        assert!(!answer.contains("# EOF"));

        let answer = get(addr, "GET / HTTP/1.0\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");
        let answer = get(addr, "POST /metrics HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 405"), "{answer}");
        // A head that never ends is cut off without an answer.
        let junk = "x".repeat(9000);
        assert_eq!(get(addr, &junk), "");
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
