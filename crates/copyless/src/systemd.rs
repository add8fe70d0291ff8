//! Telling systemd how the service is doing (sd_notify(3)): READY when
//! the listeners are up, RELOADING and READY again around a reload of the
//! configuration, STOPPING when a stop begins, and WATCHDOG while the
//! server still answers. Nothing is sent unless systemd asked for it by setting
//! NOTIFY_SOCKET (Type=notify in the unit).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixDatagram};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use copyless_proto::client::{write_negotiate_request, NegotiateOffer};
use copyless_proto::header::Header;
use copyless_proto::{command, negotiate, Writer, HEADER_LEN};

/// Where systemd listens for this service's notifications.
pub struct Notifier {
    socket: UnixDatagram,
    addr: UnixAddr,
    /// STOPPING=1 was sent: it goes once, from whichever thread sees the
    /// stop first.
    stopping: AtomicBool,
}

impl Notifier {
    /// The notifier systemd asked for, if any. An unusable NOTIFY_SOCKET
    /// is said once on stderr: the service would otherwise time out in
    /// systemd with no hint why.
    pub fn from_env() -> Option<Arc<Notifier>> {
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        let made = (|| -> io::Result<Notifier> {
            let bytes = path.as_encoded_bytes();
            let addr = match bytes.strip_prefix(b"@") {
                // Abstract socket names start with '@' in the variable.
                Some(name) => UnixAddr::from_abstract_name(name)?,
                None => UnixAddr::from_pathname(&path)?,
            };
            Ok(Notifier {
                socket: UnixDatagram::unbound()?,
                addr,
                stopping: AtomicBool::new(false),
            })
        })();
        match made {
            Ok(n) => Some(Arc::new(n)),
            Err(e) => {
                eprintln!("copyless: NOTIFY_SOCKET {}: {e}", path.to_string_lossy());
                None
            }
        }
    }

    /// Sends one notification: newline-separated `KEY=VALUE` lines.
    pub fn notify(&self, state: &str) {
        if let Err(e) = self.socket.send_to_addr(state.as_bytes(), &self.addr) {
            eprintln!("copyless: cannot notify systemd: {e}");
        }
    }

    pub fn ready(&self, status: &str) {
        self.notify(&format!("READY=1\nSTATUS={status}"));
    }

    pub fn reloading(&self) {
        // systemd wants the reload's start on CLOCK_MONOTONIC, to tell
        // this reload's READY=1 from an older one's.
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let usec = now.tv_sec as u64 * 1_000_000 + now.tv_nsec as u64 / 1000;
        self.notify(&format!("RELOADING=1\nMONOTONIC_USEC={usec}"));
    }

    pub fn stopping(&self) {
        if !self.stopping.swap(true, Ordering::AcqRel) {
            self.notify("STOPPING=1\nSTATUS=stopping");
        }
    }
}

/// The interval systemd wants watchdog pings at (WatchdogSec=), when it
/// wants them from this process.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok() != Some(std::process::id()) {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Pings the watchdog at half its interval for as long as the server
/// answers an SMB NEGOTIATE on `probe` within that half: a server whose
/// engine hangs stops being pinged, and systemd restarts it.
pub fn start_watchdog(notifier: Arc<Notifier>, interval: Duration, probe: SocketAddr) {
    let half = interval / 2;
    let spawned = std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || loop {
            match answers_negotiate(probe, half) {
                Ok(()) => notifier.notify("WATCHDOG=1"),
                Err(e) => {
                    eprintln!("copyless: watchdog: the server did not answer on {probe}: {e}")
                }
            }
            std::thread::sleep(half);
        });
    if let Err(e) = spawned {
        eprintln!("copyless: cannot start the watchdog thread: {e}");
    }
}

/// The address a client on this machine reaches listener `addr` at.
pub fn local_probe_address(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        ip if !ip.is_unspecified() => ip,
        std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
    };
    SocketAddr::new(ip, addr.port())
}

/// Connects, sends an SMB 2.0.2 NEGOTIATE and reads a whole response
/// naming the NEGOTIATE command, all within `deadline`.
fn answers_negotiate(addr: SocketAddr, deadline: Duration) -> io::Result<()> {
    let mut stream = TcpStream::connect_timeout(&addr, deadline)?;
    stream.set_read_timeout(Some(deadline))?;
    stream.set_write_timeout(Some(deadline))?;
    let mut w = Writer::new();
    w.zeros(4);
    Header {
        command: command::NEGOTIATE,
        credits: 1,
        ..Header::default()
    }
    .write(&mut w.buf);
    write_negotiate_request(
        &mut w,
        &NegotiateOffer {
            security_mode: negotiate::SIGNING_ENABLED,
            capabilities: 0,
            client_guid: [0; 16],
            dialects: &[negotiate::DIALECT_202],
            contexts: &[],
        },
    )
    .map_err(|e| io::Error::other(format!("{e:?}")))?;
    let mut frame = w.into_vec();
    let len = (frame.len() - 4) as u32;
    frame[..4].copy_from_slice(&len.to_be_bytes());
    stream.write_all(&frame)?;
    let mut head = [0u8; 4 + HEADER_LEN];
    stream.read_exact(&mut head)?;
    let header = Header::parse(&head[4..]).map_err(|e| io::Error::other(format!("{e:?}")))?;
    if header.command != command::NEGOTIATE {
        return Err(io::Error::other("the answer was not a NEGOTIATE response"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn notifications_reach_a_named_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let systemd = UnixDatagram::bind(&path).unwrap();
        let n = Notifier {
            socket: UnixDatagram::unbound().unwrap(),
            addr: UnixAddr::from_pathname(&path).unwrap(),
            stopping: AtomicBool::new(false),
        };
        n.ready("serving");
        n.stopping();
        // Said once, whoever says it again.
        n.stopping();
        n.reloading();
        let mut buf = [0u8; 256];
        let got = systemd.recv(&mut buf).unwrap();
        assert_eq!(&buf[..got], b"READY=1\nSTATUS=serving");
        let got = systemd.recv(&mut buf).unwrap();
        assert_eq!(&buf[..got], b"STOPPING=1\nSTATUS=stopping");
        let got = systemd.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..got]).unwrap();
        assert!(text.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{text}");
    }

    #[test]
    fn probes_go_to_this_machine() {
        let probe = |s: &str| local_probe_address(s.parse().unwrap()).to_string();
        assert_eq!(probe("0.0.0.0:445"), "127.0.0.1:445");
        assert_eq!(probe("[::]:445"), "[::1]:445");
        assert_eq!(probe("192.0.2.7:4450"), "192.0.2.7:4450");
    }

    #[test]
    fn a_listener_that_never_answers_fails_the_probe() {
        // Accepted by the kernel's backlog, never read.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = silent.local_addr().unwrap();
        assert!(answers_negotiate(addr, Duration::from_millis(200)).is_err());
    }
}
