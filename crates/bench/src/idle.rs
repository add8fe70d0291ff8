//! Many authenticated connections held open and idle: what each costs the
//! server is read from outside (its resident memory) while they are held.
//! Every connection answers an ECHO at the end, so none was dropped.

use std::time::{Duration, Instant};

use nix::sys::resource::{getrlimit, setrlimit, Resource};

use crate::cli::IdleArgs;
use crate::client::{self, ops};
use crate::report::Report;
use crate::RunError;

pub fn run(a: &IdleArgs) -> Result<Report, RunError> {
    // One descriptor per connection, and some to spare.
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let opts = a.connect.client_options();
    let start = Instant::now();
    let mut conns = Vec::with_capacity(a.connections as usize);
    for _ in 0..a.connections {
        conns.push(client::connect(&opts)?);
    }
    let connect_seconds = start.elapsed().as_secs_f64();
    let session = crate::session_info(&conns[0], &a.connect);
    // The caller measures the server now.
    eprintln!("idle: {} connections up", conns.len());
    std::thread::sleep(Duration::from_secs_f64(a.hold));
    for c in &mut conns {
        c.call(ops::echo())?.check("ECHO")?;
    }
    let mut r = Report::new("idle", session);
    r.param("connections", a.connections)
        .param("hold_s", a.hold);
    r.result("connections", a.connections, "")
        .result("connect_seconds", connect_seconds, "s")
        .result(
            "connections_per_s",
            f64::from(a.connections) / connect_seconds.max(1e-9),
            "/s",
        );
    Ok(r)
}
