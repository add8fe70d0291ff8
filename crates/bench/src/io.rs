//! The `io` workload: Iometer-style reads and writes of one request size
//! on one file per connection, `depth` requests in flight on each.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use copyless_proto::client::parse_write_response;
use copyless_proto::client::read_response_data;
use copyless_proto::command;
use copyless_proto::messages::FileId;

use crate::cli::{IoArgs, Pattern};
use crate::client::{self, ops, Connection, Error};
use crate::progress::{Counters, Progress};
use crate::report::{Report, SessionInfo};
use crate::stats::{cpu_seconds, Latency, Rng};
use crate::RunError;

const MIN_SIZE: u64 = 512;
const MAX_SIZE: u64 = 8 << 20;

/// What one connection measured.
#[derive(Default)]
struct Measured {
    reads: u64,
    writes: u64,
    bytes: u64,
    read_latency: Latency,
    write_latency: Latency,
    requests: u64,
    session: Option<SessionInfo>,
}

pub fn run(a: &IoArgs) -> Result<Report, RunError> {
    if !(MIN_SIZE..=MAX_SIZE).contains(&a.size) {
        return Err(RunError::Usage(format!(
            "--size must be between 512 B and 8 MiB, not {}",
            a.size
        )));
    }
    if a.file_size < a.size {
        return Err(RunError::Usage(
            "--file-size must be at least --size".into(),
        ));
    }
    let dir = a
        .connect
        .dir
        .clone()
        .unwrap_or_else(|| "copyless-bench".into());
    let n = a.connections as usize;
    let barrier = Arc::new(Barrier::new(n + 1));
    let failed = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut workers = Vec::with_capacity(n);
    for i in 0..n {
        let a = a.clone();
        let dir = dir.clone();
        let barrier = barrier.clone();
        let failed = failed.clone();
        let counters = counters.clone();
        workers.push(std::thread::spawn(move || {
            worker(i, &a, &dir, &barrier, &failed, &counters)
        }));
    }
    barrier.wait();
    let t0 = Instant::now();
    let mut cpu = (0.0, 0.0);
    if !failed.load(Ordering::Relaxed) {
        let progress = Progress::start("io", "IOs", counters, a.connect.json);
        let start = t0 + Duration::from_secs_f64(a.ramp);
        let end = start + Duration::from_secs_f64(a.time);
        sleep_until(start);
        cpu.0 = cpu_seconds();
        sleep_until(end);
        cpu.1 = cpu_seconds();
        progress.finish();
    }
    let mut total = Measured::default();
    let mut first_error = None;
    for w in workers {
        match w.join() {
            Ok(Ok(m)) => {
                total.reads += m.reads;
                total.writes += m.writes;
                total.bytes += m.bytes;
                total.read_latency.merge(&m.read_latency);
                total.write_latency.merge(&m.write_latency);
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
    if let Some(e) = first_error {
        return Err(e);
    }
    let session = total
        .session
        .ok_or_else(|| RunError::Failed("no connection reported".into()))?;
    let ios = total.reads + total.writes;
    let mut all = Latency::default();
    all.merge(&total.read_latency);
    all.merge(&total.write_latency);
    let mut r = Report::new("io", session);
    r.param("size", a.size)
        .param("depth", a.depth)
        .param("connections", a.connections)
        .param("read_pct", a.read_pct)
        .param(
            "pattern",
            match a.pattern {
                Pattern::Random => "random",
                Pattern::Sequential => "sequential",
            },
        )
        .param("file_size", a.file_size)
        .param("ramp_s", a.ramp)
        .param("time_s", a.time)
        .param("dir", dir);
    r.result("ios", ios, "")
        .result("reads", total.reads, "")
        .result("writes", total.writes, "")
        .result("bytes", total.bytes, "B")
        .result("seconds", a.time, "s")
        .result("iops", per_second(ios as f64, a.time), "IO/s")
        .result(
            "mb_per_s",
            per_second(total.bytes as f64 / 1e6, a.time),
            "MB/s",
        )
        .result("client_cpu_s", cpu.1 - cpu.0, "s")
        .result("requests", total.requests, "SMB2 messages (whole run)");
    r.latency("all", all.summary());
    if total.reads > 0 && total.writes > 0 {
        r.latency("read", total.read_latency.summary())
            .latency("write", total.write_latency.summary());
    }
    Ok(r)
}

fn per_second(x: f64, secs: f64) -> f64 {
    if secs > 0.0 {
        x / secs
    } else {
        0.0
    }
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

fn worker(
    index: usize,
    a: &IoArgs,
    dir: &str,
    barrier: &Barrier,
    failed: &AtomicBool,
    counters: &Counters,
) -> Result<Measured, RunError> {
    let prepared = prepare(index, a, dir);
    if prepared.is_err() {
        failed.store(true, Ordering::Relaxed);
    }
    // Everyone meets here even on failure, so nobody waits forever.
    barrier.wait();
    let (mut conn, file) = prepared?;
    if failed.load(Ordering::Relaxed) {
        return Ok(Measured::default());
    }
    let t0 = Instant::now();
    let start = t0 + Duration::from_secs_f64(a.ramp);
    let end = start + Duration::from_secs_f64(a.time);
    let mut m = Measured {
        session: Some(crate::session_info(&conn, &a.connect)),
        ..Measured::default()
    };
    let result = load(&mut conn, file, a, index, start, end, counters, &mut m);
    m.requests = conn.requests_sent();
    if let Err(e) = result {
        failed.store(true, Ordering::Relaxed);
        return Err(e.into());
    }
    Ok(m)
}

/// Connects and makes sure the connection's file exists at full size.
fn prepare(index: usize, a: &IoArgs, dir: &str) -> Result<(Connection, FileId), RunError> {
    let mut conn = client::connect(&a.connect.client_options())?;
    let size = a.size as u32;
    if a.read_pct > 0 && size > conn.max_read() {
        return Err(RunError::Usage(format!(
            "--size {} is larger than the server's MaxReadSize {}",
            a.size,
            conn.max_read()
        )));
    }
    if a.read_pct < 100 && size > conn.max_write() {
        return Err(RunError::Usage(format!(
            "--size {} is larger than the server's MaxWriteSize {}",
            a.size,
            conn.max_write()
        )));
    }
    ops::make_dirs(&mut conn, dir)?;
    let path = format!("{dir}\\io-{index}.dat");
    let file = ops::open_file(&mut conn, &path, ops::DISPOSITION_OPEN_IF)?;
    let have = ops::file_size(&mut conn, file)?;
    if have < a.file_size {
        let chunk = u64::from(conn.max_write().min(1 << 20));
        let data = pattern(chunk as usize, index as u64);
        let offsets = (have / chunk * chunk..a.file_size).step_by(chunk as usize);
        let file_size = a.file_size;
        ops::pipeline(
            &mut conn,
            8,
            offsets.map(|off| {
                let len = chunk.min(file_size - off) as usize;
                ops::write(file, off, &data[..len]).map(|m| vec![m])
            }),
            |reply| reply.check("(filling the file)").map(|_| ()),
        )?;
    }
    Ok((conn, file))
}

/// Bytes that do not compress to nothing.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed.wrapping_add(0x9e37_79b9_7f4a_7c15));
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

#[allow(clippy::too_many_arguments)]
fn load(
    conn: &mut Connection,
    file: FileId,
    a: &IoArgs,
    index: usize,
    start: Instant,
    end: Instant,
    counters: &Counters,
    m: &mut Measured,
) -> Result<(), Error> {
    let size = a.size;
    let data = pattern(size as usize, index as u64 + 1);
    let blocks = a.file_size / size;
    let mut rng =
        Rng::new(crate::unix_now() ^ ((index as u64) << 32) ^ u64::from(std::process::id()));
    let mut next_seq = 0u64;
    let mut in_flight: HashMap<u64, (Instant, bool)> = HashMap::with_capacity(a.depth as usize);
    loop {
        if Instant::now() >= end {
            break;
        }
        while in_flight.len() < a.depth as usize && conn.has_credits_for(size as usize) {
            let is_read = rng.below(100) < u64::from(a.read_pct);
            let offset = match a.pattern {
                Pattern::Random => rng.below(blocks) * size,
                Pattern::Sequential => {
                    let off = next_seq;
                    next_seq = if off + 2 * size > a.file_size {
                        0
                    } else {
                        off + size
                    };
                    off
                }
            };
            let msg = if is_read {
                ops::read(file, offset, size as u32)
            } else {
                ops::write(file, offset, &data)?
            };
            // The clock starts before the send, as Iometer's does.
            let sent = Instant::now();
            let mid = conn.submit(vec![msg])?[0];
            in_flight.insert(mid, (sent, is_read));
        }
        if in_flight.is_empty() {
            return Err(Error::Protocol("the server granted no credits".into()));
        }
        let reply = conn.next_reply()?;
        let done = Instant::now();
        complete(&reply, &mut in_flight, size, start, end, done, counters, m)?;
        conn.recycle(reply);
    }
    while !in_flight.is_empty() {
        let reply = conn.next_reply()?;
        // Completions after the end are not counted.
        complete(&reply, &mut in_flight, size, start, end, end, counters, m)?;
        conn.recycle(reply);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn complete(
    reply: &client::Reply,
    in_flight: &mut HashMap<u64, (Instant, bool)>,
    size: u64,
    start: Instant,
    end: Instant,
    done: Instant,
    counters: &Counters,
    m: &mut Measured,
) -> Result<(), Error> {
    let (sent, is_read) = in_flight
        .remove(&reply.mid())
        .ok_or_else(|| Error::Protocol(format!("unexpected reply {}", reply.mid())))?;
    let status = reply.status();
    if status != 0 {
        return Err(Error::Status {
            command: reply.header.command,
            status,
            what: "(load)".into(),
        });
    }
    let moved = if is_read {
        if reply.header.command != command::READ {
            return Err(Error::Protocol("reply to a READ is not a READ".into()));
        }
        read_response_data(&reply.msg)?.len() as u64
    } else {
        u64::from(parse_write_response(&reply.msg)?)
    };
    if moved != size {
        return Err(Error::Protocol(format!(
            "{} moved {moved} bytes, not {size}",
            if is_read { "READ" } else { "WRITE" }
        )));
    }
    counters.add(1, size);
    if done >= start && done < end {
        if is_read {
            m.reads += 1;
            m.read_latency.record(done - sent);
        } else {
            m.writes += 1;
            m.write_latency.record(done - sent);
        }
        m.bytes += size;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_deterministic_and_varied() {
        let a = pattern(1000, 1);
        assert_eq!(a.len(), 1000);
        assert_eq!(a, pattern(1000, 1));
        assert_ne!(a, pattern(1000, 2));
        assert!(a.iter().any(|b| *b != a[0]));
    }
}
