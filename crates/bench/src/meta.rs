//! The `meta` workload: loops of create, stat, close, rename and delete on
//! one connection, then the listing of a large directory.

use std::sync::Arc;
use std::time::Instant;

use copyless_proto::messages::FileId;

use crate::cli::MetaArgs;
use crate::client::{self, ops, Connection, Error};
use crate::progress::{Counters, Progress};
use crate::report::Report;
use crate::stats::{cpu_seconds, Latency};
use crate::RunError;

/// QUERY_DIRECTORY output buffer, what Windows asks for.
const LIST_BUFFER: u32 = 65536;

#[derive(Default)]
struct OpLatencies {
    create: Latency,
    stat: Latency,
    close: Latency,
    rename: Latency,
    delete: Latency,
}

pub fn run(a: &MetaArgs) -> Result<Report, RunError> {
    let dir = a
        .connect
        .dir
        .clone()
        .unwrap_or_else(|| "copyless-bench\\meta".into());
    let mut conn = client::connect(&a.connect.client_options())?;
    let session = crate::session_info(&conn, &a.connect);
    ops::make_dirs(&mut conn, &dir)?;
    let counters = Arc::new(Counters::default());

    // Names unique to this run, so that leftovers of an interrupted run
    // never collide.
    let tag = format!("{}-{}", crate::unix_now(), std::process::id());
    let mut lat = OpLatencies::default();
    let progress = Progress::start("meta", "loops", counters.clone(), a.connect.json);
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    for i in 0..a.loops {
        one_loop(&mut conn, &dir, &tag, i, &mut lat)?;
        counters.add(1, 0);
    }
    let loop_seconds = start.elapsed().as_secs_f64();
    let loop_cpu = cpu_seconds() - cpu0;
    progress.finish();

    let mut r = Report::new("meta", session);
    r.param("loops", a.loops)
        .param("list_entries", a.list_entries)
        .param("dir", dir.clone());
    let ops_done = a.loops * 5;
    r.result("loops", a.loops, "")
        .result("ops", ops_done, "")
        .result("seconds", loop_seconds, "s")
        .result(
            "ops_per_s",
            ops_done as f64 / loop_seconds.max(1e-9),
            "ops/s",
        )
        .result("client_cpu_s", loop_cpu, "s");
    r.latency("create", lat.create.summary())
        .latency("stat", lat.stat.summary())
        .latency("close", lat.close.summary())
        .latency("rename", lat.rename.summary())
        .latency("delete", lat.delete.summary());

    if a.list_entries > 0 {
        let list_dir = format!("{dir}\\list-{}", a.list_entries);
        populate(&mut conn, &list_dir, a.list_entries)?;
        let start = Instant::now();
        let (entries, requests) = ops::list_dir(&mut conn, &list_dir, LIST_BUFFER)?;
        let seconds = start.elapsed().as_secs_f64();
        if entries != a.list_entries {
            return Err(RunError::Failed(format!(
                "listed {entries} entries in {list_dir}, expected {}",
                a.list_entries
            )));
        }
        r.result("list_entries", entries, "")
            .result("list_requests", requests, "QUERY_DIRECTORY")
            .result("list_seconds", seconds, "s")
            .result(
                "list_entries_per_s",
                entries as f64 / seconds.max(1e-9),
                "entries/s",
            );
    }
    r.result(
        "requests",
        conn.requests_sent(),
        "SMB2 messages (whole run)",
    );
    Ok(r)
}

fn timed<T>(lat: &mut Latency, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    let begin = Instant::now();
    let out = f()?;
    lat.record(begin.elapsed());
    Ok(out)
}

/// create, stat, close, rename (open, SET_INFO, close), delete (open with
/// delete-on-close, close).
fn one_loop(
    conn: &mut Connection,
    dir: &str,
    tag: &str,
    i: u64,
    lat: &mut OpLatencies,
) -> Result<(), Error> {
    let name = format!("{dir}\\m{tag}-{i}");
    let renamed = format!("{dir}\\r{tag}-{i}");
    let id = timed(&mut lat.create, || {
        let reply = conn.call(ops::create(
            &name,
            ops::ACCESS_RW | ops::ACCESS_DELETE,
            ops::DISPOSITION_CREATE,
            ops::OPTION_NON_DIRECTORY_FILE,
        )?)?;
        ops::created(reply, &name)
    })?;
    timed(&mut lat.stat, || {
        conn.call(ops::query_info(id, ops::FILE_NETWORK_OPEN_INFORMATION, 56))?
            .check(&name)
            .map(|_| ())
    })?;
    timed(&mut lat.close, || close(conn, id, &name))?;
    timed(&mut lat.rename, || {
        let reply = conn.call(ops::create(
            &name,
            ops::ACCESS_DELETE | ops::ACCESS_READ_ATTRIBUTES | ops::ACCESS_SYNCHRONIZE,
            ops::DISPOSITION_OPEN,
            ops::OPTION_NON_DIRECTORY_FILE,
        )?)?;
        let id = ops::created(reply, &name)?;
        conn.call(ops::set_info(
            id,
            ops::FILE_RENAME_INFORMATION,
            &ops::rename_info(&renamed),
        )?)?
        .check(&name)?;
        close(conn, id, &renamed)
    })?;
    timed(&mut lat.delete, || {
        let reply = conn.call(ops::create(
            &renamed,
            ops::ACCESS_DELETE | ops::ACCESS_READ_ATTRIBUTES | ops::ACCESS_SYNCHRONIZE,
            ops::DISPOSITION_OPEN,
            ops::OPTION_NON_DIRECTORY_FILE | ops::OPTION_DELETE_ON_CLOSE,
        )?)?;
        let id = ops::created(reply, &renamed)?;
        close(conn, id, &renamed)
    })
}

fn close(conn: &mut Connection, id: FileId, what: &str) -> Result<(), Error> {
    conn.call(ops::close(id))?.check(what).map(|_| ())
}

/// Makes sure `dir` holds entries e0 .. e(n-1) (creating them, pipelined,
/// when missing). Kept between runs, since making 50,000 files takes
/// longer than listing them; a run finds it ready when its last entry
/// exists and the one after does not.
fn populate(conn: &mut Connection, dir: &str, n: u64) -> Result<(), RunError> {
    ops::make_dirs(conn, dir)?;
    let last = format!("{dir}\\e{}", n - 1);
    let beyond = format!("{dir}\\e{n}");
    if ops::exists(conn, &last)? && !ops::exists(conn, &beyond)? {
        return Ok(());
    }
    let items = (0..n).map(|i| {
        let name = format!("{dir}\\e{i}");
        Ok(vec![
            ops::create(
                &name,
                ops::ACCESS_RW,
                ops::DISPOSITION_OPEN_IF,
                ops::OPTION_NON_DIRECTORY_FILE,
            )?,
            ops::close(FileId::RELATED),
        ])
    });
    ops::pipeline(conn, 64, items, |reply| {
        reply
            .check("(populating the listing directory)")
            .map(|_| ())
    })?;
    let (have, _) = ops::list_dir(conn, dir, LIST_BUFFER)?;
    if have != n {
        return Err(RunError::Failed(format!(
            "{dir} holds {have} entries, not {n}: remove it and run again"
        )));
    }
    Ok(())
}
