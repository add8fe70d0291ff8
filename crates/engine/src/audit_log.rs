//! The audit log: the events shares keep (core audit.rs), one line each,
//! to a file of their own or to standard error (the journal under
//! systemd), written by a thread of their own so that no connection
//! waits on a disk for them.
//!
//! Bounded everywhere a client could push: the queue to the writer holds
//! [`QUEUE`] events, and those it had no room for are counted and said
//! in the log ("120 audit events lost: the audit log fell behind"); the
//! file is rotated at its size limit, keeping a set number of old ones;
//! the latest [`RECENT`] lines are kept in memory for `copyless status
//! --audit`.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use copyless_core::audit::Audit;

use crate::log_limit::RateLimit;

/// Events waiting for the writer.
const QUEUE: usize = 4096;
/// Lines kept for `copyless status --audit`.
pub const RECENT: usize = 1000;
/// How long the end of the server waits for the last lines.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

static WRITE_FAILED: RateLimit = RateLimit::new(Duration::from_secs(60));

/// Where the lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTo {
    /// Standard error, as `copyless: audit ...`.
    Journal,
    /// A file, made mode 0640, moved to `PATH.1` when the next line would
    /// take it past `max_bytes` (`PATH.1` to `PATH.2`, ... up to `keep`
    /// old files; 0 keeps none).
    File {
        path: PathBuf,
        max_bytes: u64,
        keep: u32,
    },
}

enum Message {
    Line(Audit),
    /// Write what is queued, then say so.
    Flush(mpsc::Sender<()>),
}

/// Where connections hand their audit events.
pub struct AuditLog {
    queue: SyncSender<Message>,
    lost: Arc<AtomicU64>,
    recent: Arc<Mutex<VecDeque<String>>>,
}

/// The thread that writes the lines.
pub struct AuditWriter {
    queue: SyncSender<Message>,
    thread: JoinHandle<()>,
}

impl AuditLog {
    /// Opens the file (failing if it cannot be written) and starts the
    /// writer.
    pub fn start(to: AuditTo) -> io::Result<(Arc<AuditLog>, AuditWriter)> {
        let out = Out::open(to)?;
        let (queue, incoming) = mpsc::sync_channel(QUEUE);
        let lost = Arc::new(AtomicU64::new(0));
        let recent = Arc::new(Mutex::new(VecDeque::with_capacity(RECENT)));
        let thread = {
            let (lost, recent) = (lost.clone(), recent.clone());
            std::thread::Builder::new()
                .name("audit".into())
                .spawn(move || write_lines(incoming, out, &lost, &recent))?
        };
        let log = Arc::new(AuditLog {
            queue: queue.clone(),
            lost,
            recent,
        });
        Ok((log, AuditWriter { queue, thread }))
    }

    /// Queues an event; counted as lost when the writer is that far
    /// behind.
    pub fn record(&self, audit: Audit) {
        match self.queue.try_send(Message::Line(audit)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                self.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The latest lines written, oldest first: at most `n`.
    pub fn recent(&self, n: usize) -> Vec<String> {
        let recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent
            .iter()
            .skip(recent.len().saturating_sub(n))
            .cloned()
            .collect()
    }
}

impl AuditWriter {
    /// The server has stopped: what is queued is written.
    pub fn finish(self) {
        let (done, wait) = mpsc::channel();
        if self.queue.send(Message::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(FLUSH_WAIT);
        }
        drop(self.thread);
    }
}

fn write_lines(
    incoming: Receiver<Message>,
    mut out: Out,
    lost: &AtomicU64,
    recent: &Mutex<VecDeque<String>>,
) {
    // Lines are buffered while more are waiting, and written out as soon
    // as none is: one write for a burst, not one per line.
    while let Ok(first) = incoming.recv() {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            let n = lost.swap(0, Ordering::Relaxed);
            if n > 0 {
                let line = format!("{n} audit events lost: the audit log fell behind");
                out.write(&line, recent);
            }
            match message {
                Message::Line(audit) => out.write(&audit.to_string(), recent),
                Message::Flush(done) => {
                    out.flush();
                    let _ = done.send(());
                }
            }
            next = incoming.try_recv().ok();
        }
        out.flush();
    }
    out.flush();
}

/// The open destination.
enum Out {
    Journal,
    File(AuditFile),
}

/// The audit file, and how long it is.
struct AuditFile {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    file: BufWriter<File>,
    len: u64,
}

impl Out {
    fn open(to: AuditTo) -> io::Result<Out> {
        Ok(match to {
            AuditTo::Journal => Out::Journal,
            AuditTo::File {
                path,
                max_bytes,
                keep,
            } => {
                let file = append_to(&path)?;
                let len = file.metadata()?.len();
                Out::File(AuditFile {
                    path,
                    max_bytes,
                    keep,
                    file: BufWriter::new(file),
                    len,
                })
            }
        })
    }

    /// Writes `line` (with the time, in a file), and keeps it among the
    /// recent ones.
    fn write(&mut self, line: &str, recent: &Mutex<VecDeque<String>>) {
        let stamped = format!("{} {line}", utc_stamp(SystemTime::now()));
        let written = match self {
            Out::Journal => writeln!(io::stderr().lock(), "copyless: {line}"),
            Out::File(f) => f.append(&stamped),
        };
        if let Err(e) = written {
            failed(&e);
        }
        let mut recent = recent.lock().unwrap_or_else(|e| e.into_inner());
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(stamped);
    }

    /// Writes out what is buffered.
    fn flush(&mut self) {
        if let Out::File(f) = self {
            if let Err(e) = f.file.flush() {
                failed(&e);
            }
        }
    }
}

fn failed(e: &io::Error) {
    WRITE_FAILED.log(|| format!("audit log: {e}; audit events are being lost"));
}

impl AuditFile {
    /// Appends `line`, first moving the file aside if it would grow past
    /// its limit.
    fn append(&mut self, line: &str) -> io::Result<()> {
        let bytes = line.len() as u64 + 1;
        if self.len > 0 && self.len + bytes > self.max_bytes {
            self.file.flush()?;
            rotate(&self.path, self.keep)?;
            self.file = BufWriter::new(append_to(&self.path)?);
            self.len = 0;
        }
        writeln!(self.file, "{line}")?;
        self.len += bytes;
        Ok(())
    }
}

fn append_to(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
}

/// Moves `path` to `path.1`, `path.1` to `path.2`... keeping `keep` old
/// files; with none kept, `path` is removed.
fn rotate(path: &Path, keep: u32) -> io::Result<()> {
    let old = |n: u32| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    };
    if keep == 0 {
        return fs::remove_file(path);
    }
    for n in (1..keep).rev() {
        match fs::rename(old(n), old(n + 1)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    fs::rename(path, old(1))
}

/// `2026-11-29T17:02:03Z`: the time in UTC, to the second.
pub fn utc_stamp(at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use copyless_core::audit::AuditKind;

    fn event(path: &str) -> Audit {
        Audit {
            kind: AuditKind::Delete,
            user: "alice".into(),
            client: "192.0.2.7:50122".parse().unwrap(),
            share: "family".into(),
            path: path.into(),
            to: None,
            status: 0,
        }
    }

    #[test]
    fn utc_stamps() {
        let at = |secs| SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(utc_stamp(at(0)), "1970-01-01T00:00:00Z");
        assert_eq!(utc_stamp(at(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(utc_stamp(at(1_795_972_923)), "2026-11-29T17:22:03Z");
    }

    #[test]
    fn the_file_is_rotated_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let to = AuditTo::File {
            path: path.clone(),
            max_bytes: 1000,
            keep: 2,
        };
        let (log, writer) = AuditLog::start(to).unwrap();
        for i in 0..100 {
            log.record(event(&format!("file{i:03}.txt")));
        }
        writer.finish();
        let read = |p: &Path| fs::read_to_string(p).unwrap();
        let current = read(&path);
        assert!(current.len() <= 1000, "{}", current.len());
        assert!(current.ends_with("path=\"file099.txt\" status=STATUS_SUCCESS\n"));
        assert!(read(&dir.path().join("audit.log.1")).len() <= 1000);
        assert!(dir.path().join("audit.log.2").exists());
        assert!(!dir.path().join("audit.log.3").exists());
        let mode = fs::metadata(&path).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o640
        );
        // Each line is whole, and stamped.
        for line in current.lines() {
            assert!(line.contains("Z audit delete ok user=\"alice\""), "{line}");
        }
        let recent = log.recent(3);
        assert_eq!(recent.len(), 3);
        assert!(recent[2].ends_with("path=\"file099.txt\" status=STATUS_SUCCESS"));
        assert_eq!(log.recent(5000).len(), 100);
    }

    #[test]
    fn a_file_that_cannot_be_made_is_an_error_at_start() {
        let to = AuditTo::File {
            path: "/nonexistent/dir/audit.log".into(),
            max_bytes: 1000,
            keep: 1,
        };
        assert!(AuditLog::start(to).is_err());
    }
}
