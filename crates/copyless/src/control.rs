//! The control socket: a Unix socket, readable only by root and the
//! server's own user, through which `copyless top` fetches snapshots and
//! `copyless status` the server's sessions and open files, and the latest
//! lines of the audit log.
//!
//! The protocol is one line in, one JSON document out: the client sends
//! `snapshot\n` (or `status\n`, or `audit\n`) and reads the server's
//! [`Snapshot`] (or its status, or `{"lines": [...]}`) until end of
//! stream.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use copyless_engine::AuditLog;
use copyless_trace::{Snapshot, Tracer};

/// Longest request line accepted.
const MAX_REQUEST: u64 = 256;
/// A client that stalls is dropped after this long.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest snapshot `fetch` accepts.
const MAX_RESPONSE: u64 = 256 * 1024 * 1024;

/// The bound socket; removes its file when dropped.
pub struct ControlSocket {
    path: PathBuf,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Makes the `status` document when asked.
pub type StatusSource = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// What the socket answers from, beside the tracer.
#[derive(Clone)]
pub struct Sources {
    pub status: StatusSource,
    pub audit: Arc<AuditLog>,
}

/// Binds the socket (replacing a stale one) and serves it on a thread of
/// its own.
pub fn start(path: &Path, tracer: Arc<Tracer>, sources: Sources) -> io::Result<ControlSocket> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .create(dir)
                .and_then(|_| {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                })?;
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "exists and is not a socket",
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another server is answering on it",
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    // The peer check in `serve` is what keeps others out; the mode makes
    // that plain to anyone looking.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let _ = serve(stream, &tracer, &sources);
            }
        })?;
    Ok(ControlSocket {
        path: path.to_path_buf(),
    })
}

/// Only root and the user the server runs as may read the statistics.
fn peer_allowed(stream: &UnixStream) -> bool {
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) => cred.uid.is_root() || cred.uid == rustix::process::geteuid(),
        Err(_) => false,
    }
}

fn serve(stream: UnixStream, tracer: &Tracer, sources: &Sources) -> io::Result<()> {
    if !peer_allowed(&stream) {
        return Ok(());
    }
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut line = String::new();
    BufReader::new((&stream).take(MAX_REQUEST)).read_line(&mut line)?;
    let mut out = &stream;
    match line.trim() {
        "snapshot" => {
            let json = serde_json::to_vec(&tracer.snapshot()).map_err(io::Error::other)?;
            out.write_all(&json)?;
            out.write_all(b"\n")
        }
        "status" => {
            out.write_all((sources.status)().to_string().as_bytes())?;
            out.write_all(b"\n")
        }
        "audit" => {
            let lines = sources.audit.recent(copyless_engine::AUDIT_RECENT);
            out.write_all(serde_json::json!({ "lines": lines }).to_string().as_bytes())?;
            out.write_all(b"\n")
        }
        other => {
            let msg = serde_json::json!({ "error": format!("unknown request {other:?}") });
            out.write_all(msg.to_string().as_bytes())?;
            out.write_all(b"\n")
        }
    }
}

/// The control socket a command talks to: `control` when given, else
/// the one `config` names, else the one of the default configuration file
/// (the one `serve` reads), else the default one.
pub fn socket_path(control: Option<&Path>, config: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = control {
        return Ok(path.to_path_buf());
    }
    let file = config
        .map(Path::to_path_buf)
        .or_else(crate::config::default_config_file);
    match file {
        Some(file) => crate::config::Config::load(&file)
            .map(|c| c.control_path())
            .map_err(|e| e.to_string()),
        None => Ok(crate::config::default_control_path(
            rustix::process::geteuid().is_root(),
            &crate::config::default_state_dir(),
        )),
    }
}

/// Asks the server at `path` for a snapshot.
pub fn fetch(path: &Path) -> io::Result<Snapshot> {
    ask(path, "snapshot")
}

/// Sends `request` to the server at `path` and reads its JSON answer.
pub fn ask<T: serde::de::DeserializeOwned>(path: &Path, request: &str) -> io::Result<T> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(IO_TIMEOUT * 2))?;
    stream.write_all(format!("{request}\n").as_bytes())?;
    let mut text = Vec::new();
    (&stream).take(MAX_RESPONSE).read_to_end(&mut text)?;
    if text.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "the server closed the connection without answering \
             (only root and the server's user may read it)",
        ));
    }
    serde_json::from_slice(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    use copyless_trace::{clock, FrameTimes, Request};

    fn sources(status: serde_json::Value) -> Sources {
        Sources {
            status: Arc::new(move || status.clone()),
            audit: AuditLog::start(copyless_engine::AuditTo::Journal)
                .unwrap()
                .0,
        }
    }

    fn temp_path(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "copyless-control-test-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("sub").join("control.sock")
    }

    #[test]
    fn serves_snapshots_to_its_own_user() {
        let path = temp_path("serve");
        let tracer = Tracer::new(vec!["s".into()], true);
        let status = sources(serde_json::json!({ "sessions": [] }));
        let socket = start(&path, tracer.clone(), status.clone()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        let mut rec = tracer.connection(IpAddr::from([127, 0, 0, 1])).unwrap();
        let now = clock::now();
        rec.frame(
            &FrameTimes {
                first_byte: now,
                received: now,
                parsed: now,
                dispatched: now,
                handled: now,
                sent: now,
                ..FrameTimes::default()
            },
            [Request {
                command: 9,
                message_id: 1,
                status: 0,
                share: Some(0),
                user: Some("u"),
            }],
        );
        let s = fetch(&path).unwrap();
        assert!(s.enabled);
        assert_eq!(s.command(9).unwrap().count, 1);
        assert_eq!(s.live_connections, 1);

        // A second server must not steal a live socket.
        assert_eq!(
            start(&path, tracer.clone(), status.clone())
                .err()
                .map(|e| e.kind()),
            Some(io::ErrorKind::AddrInUse)
        );

        let answer: serde_json::Value = ask(&path, "status").unwrap();
        assert_eq!(answer, serde_json::json!({ "sessions": [] }));
        let answer: serde_json::Value = ask(&path, "audit").unwrap();
        assert_eq!(answer, serde_json::json!({ "lines": [] }));

        // Unknown requests are answered with an error, not a snapshot.
        let mut stream = UnixStream::connect(&path).unwrap();
        stream.write_all(b"reboot\n").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.contains("unknown request"), "{answer}");

        drop(socket);
        assert!(!path.exists());
        assert!(fetch(&path).is_err());
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }

    #[test]
    fn replaces_a_stale_socket_but_not_a_file() {
        let path = temp_path("stale");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        drop(UnixListener::bind(&path).unwrap());
        let tracer = Tracer::new(vec![], true);
        let status = sources(serde_json::json!({}));
        let socket = start(&path, tracer.clone(), status.clone()).unwrap();
        assert!(fetch(&path).is_ok());
        drop(socket);

        std::fs::write(&path, b"not a socket").unwrap();
        assert!(start(&path, tracer, status).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }
}
