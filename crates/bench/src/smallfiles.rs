//! The `smallfiles` workload: copy N files of S bytes into D directories
//! as a desktop client does, one file after the other on each connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use copyless_proto::client::parse_write_response;
use copyless_proto::messages::FileId;

use crate::cli::SmallfilesArgs;
use crate::client::{self, ops, Connection, Error, Msg};
use crate::progress::{Counters, Progress};
use crate::report::{Report, SessionInfo};
use crate::stats::{cpu_seconds, Latency};
use crate::RunError;

#[derive(Default)]
struct Measured {
    files: u64,
    bytes: u64,
    latency: Latency,
    requests: u64,
    session: Option<SessionInfo>,
}

/// The directory file `i` goes to.
fn file_path(dir: &str, dirs: u64, i: u64) -> String {
    format!("{dir}\\d{}\\f{i}", i % dirs)
}

pub fn run(a: &SmallfilesArgs) -> Result<Report, RunError> {
    let dir = a.connect.dir.clone().unwrap_or_else(|| {
        format!(
            "copyless-bench\\smallfiles-{}-{}",
            crate::unix_now(),
            std::process::id()
        )
    });
    // The directories exist before the clock starts: the figure is about
    // files.
    {
        let mut conn = client::connect(&a.connect.client_options())?;
        ops::make_dirs(&mut conn, &dir)?;
        for d in 0..a.dirs.min(a.files.max(1)) {
            ops::make_dir(&mut conn, &format!("{dir}\\d{d}"))?;
        }
    }
    let n = a.connections as usize;
    let barrier = Arc::new(Barrier::new(n + 1));
    let failed = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut workers = Vec::with_capacity(n);
    for t in 0..n {
        let a = a.clone();
        let dir = dir.clone();
        let barrier = barrier.clone();
        let failed = failed.clone();
        let counters = counters.clone();
        workers.push(std::thread::spawn(move || {
            worker(t, &a, &dir, &barrier, &failed, &counters)
        }));
    }
    barrier.wait();
    let start = Instant::now();
    let cpu0 = cpu_seconds();
    let progress = Progress::start("smallfiles", "files", counters, a.connect.json);
    let mut total = Measured::default();
    let mut first_error = None;
    for w in workers {
        match w.join() {
            Ok(Ok(m)) => {
                total.files += m.files;
                total.bytes += m.bytes;
                total.latency.merge(&m.latency);
                total.requests += m.requests;
                total.session = total.session.or(m.session);
            }
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(RunError::Failed("a worker thread panicked".into()));
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    progress.finish();
    if let Some(e) = first_error {
        return Err(e);
    }
    let session = total
        .session
        .ok_or_else(|| RunError::Failed("no connection reported".into()))?;
    let mut r = Report::new("smallfiles", session);
    r.param("files", a.files)
        .param("file_size", a.file_size)
        .param("dirs", a.dirs)
        .param("connections", a.connections)
        .param("compound", a.compound)
        .param("dir", dir);
    r.result("files", total.files, "")
        .result("bytes", total.bytes, "B")
        .result("seconds", seconds, "s")
        .result(
            "files_per_s",
            total.files as f64 / seconds.max(1e-9),
            "files/s",
        )
        .result(
            "mb_per_s",
            total.bytes as f64 / 1e6 / seconds.max(1e-9),
            "MB/s",
        )
        .result("client_cpu_s", cpu, "s")
        .result("requests", total.requests, "SMB2 messages (whole run)");
    r.latency("file", total.latency.summary());
    Ok(r)
}

fn worker(
    t: usize,
    a: &SmallfilesArgs,
    dir: &str,
    barrier: &Barrier,
    failed: &AtomicBool,
    counters: &Counters,
) -> Result<Measured, RunError> {
    let conn = client::connect(&a.connect.client_options());
    if conn.is_err() {
        failed.store(true, Ordering::Relaxed);
    }
    barrier.wait();
    let mut conn = conn?;
    if failed.load(Ordering::Relaxed) {
        return Ok(Measured::default());
    }
    let data = vec![0x5au8; a.file_size as usize];
    let mut m = Measured {
        session: Some(crate::session_info(&conn, &a.connect)),
        ..Measured::default()
    };
    let step = a.connections as usize;
    for i in (t as u64..a.files).step_by(step) {
        if failed.load(Ordering::Relaxed) {
            break;
        }
        let path = file_path(dir, a.dirs, i);
        let begin = Instant::now();
        let result = if a.compound {
            copy_compound(&mut conn, &path, &data)
        } else {
            copy_file(&mut conn, &path, &data)
        };
        if let Err(e) = result {
            failed.store(true, Ordering::Relaxed);
            return Err(e.into());
        }
        m.latency.record(begin.elapsed());
        m.files += 1;
        m.bytes += data.len() as u64;
        counters.add(1, data.len() as u64);
    }
    m.requests = conn.requests_sent();
    Ok(m)
}

fn now_filetime() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() + 11_644_473_600) * 10_000_000 + u64::from(d.subsec_nanos() / 100)
}

/// One file the way a desktop copy does it: open for writing, look at the
/// new file, set its final size, write, carry the timestamp over, close.
fn copy_file(conn: &mut Connection, path: &str, data: &[u8]) -> Result<(), Error> {
    let reply = conn.call(ops::create(
        path,
        ops::ACCESS_RW | ops::ACCESS_DELETE,
        ops::DISPOSITION_OVERWRITE_IF,
        ops::OPTION_NON_DIRECTORY_FILE,
    )?)?;
    let id = ops::created(reply, path)?;
    conn.call(ops::query_info(id, ops::FILE_STANDARD_INFORMATION, 24))?
        .check(path)?;
    conn.call(ops::set_info(
        id,
        ops::FILE_END_OF_FILE_INFORMATION,
        &ops::end_of_file_info(data.len() as u64),
    )?)?
    .check(path)?;
    let chunk = conn.max_write().max(1) as usize;
    let mut offset = 0usize;
    for part in data.chunks(chunk) {
        let reply = conn
            .call(ops::write(id, offset as u64, part)?)?
            .check(path)?;
        if parse_write_response(&reply.msg)? as usize != part.len() {
            return Err(Error::Protocol(format!("short write to {path}")));
        }
        offset += part.len();
    }
    conn.call(ops::set_info(
        id,
        ops::FILE_BASIC_INFORMATION,
        &ops::basic_info_write_time(now_filetime()),
    )?)?
    .check(path)?;
    conn.call(ops::close(id))?.check(path)?;
    Ok(())
}

/// CREATE, WRITE(s) and CLOSE as one related compound.
fn copy_compound(conn: &mut Connection, path: &str, data: &[u8]) -> Result<(), Error> {
    let mut msgs: Vec<Msg> = vec![ops::create(
        path,
        ops::ACCESS_RW | ops::ACCESS_DELETE,
        ops::DISPOSITION_OVERWRITE_IF,
        ops::OPTION_NON_DIRECTORY_FILE,
    )?];
    let chunk = conn.max_write().max(1) as usize;
    let mut offset = 0u64;
    for part in data.chunks(chunk) {
        msgs.push(ops::write(FileId::RELATED, offset, part)?);
        offset += part.len() as u64;
    }
    msgs.push(ops::close(FileId::RELATED));
    for reply in conn.call_compound(msgs)? {
        reply.check(path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_dealt_over_directories() {
        assert_eq!(file_path("top", 100, 0), "top\\d0\\f0");
        assert_eq!(file_path("top", 100, 1234), "top\\d34\\f1234");
        assert_eq!(file_path("top", 1, 7), "top\\d0\\f7");
    }
}
