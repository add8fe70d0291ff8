//! The process's descriptor limit, and how it is shared between
//! connections and open files so that neither can starve the other.
//!
//! Every connection holds its socket and, while a request runs, perhaps a
//! directory it looks into; every open file holds one descriptor. Caps
//! derived here keep the sum below the limit with room to spare, so that a
//! user who opens all the files allowed still leaves `accept` and other
//! users' lookups working.

use std::io;

use crate::config::Limits;

/// Descriptors kept aside for the process itself: standard streams,
/// listeners, the control and metrics sockets and their clients, reading
/// the user store.
const RESERVED: u64 = 64;

/// A connection's socket, plus one descriptor a request may open briefly.
const PER_CONNECTION: u64 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// RLIMIT_NOFILE in force.
    pub descriptors: u64,
    pub max_connections: u32,
    pub open_files_total: u32,
    pub open_files_per_user: u32,
    pub open_files_per_connection: u32,
    /// Configured caps that were lowered to fit, in words for the log.
    pub lowered: Vec<String>,
}

/// Raises the soft descriptor limit to the hard one (the default soft
/// limit of 1024 is far below what a file server needs) and returns the
/// limit now in force.
pub fn raise_limit() -> io::Result<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let Some(soft) = limit.current else {
        // Unlimited already.
        return Ok(u64::MAX);
    };
    if limit.maximum.is_some_and(|hard| hard <= soft) {
        return Ok(soft);
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => Ok(limit.maximum.unwrap_or(u64::MAX)),
        // An unlimited hard limit above the kernel's nr_open cannot be
        // reached; stay where we are.
        Err(_) => Ok(soft),
    }
}

/// Shares `descriptors` out under the configured caps.
pub fn budget(descriptors: u64, limits: &Limits) -> Budget {
    let mut lowered = Vec::new();
    let usable = descriptors.saturating_sub(RESERVED).max(8);
    // At most half of what is usable goes to connections.
    let fit_connections = clamp_u32(usable / (2 * PER_CONNECTION)).max(1);
    let max_connections = limits.max_connections.min(fit_connections);
    if max_connections < limits.max_connections {
        lowered.push(format!(
            "limits.max_connections {} -> {max_connections}",
            limits.max_connections
        ));
    }
    let fit_opens = clamp_u32(usable - u64::from(max_connections) * PER_CONNECTION).max(1);
    let open_files_total = match limits.max_open_files_total {
        Some(n) if n > fit_opens => {
            lowered.push(format!("limits.max_open_files_total {n} -> {fit_opens}"));
            fit_opens
        }
        Some(n) => n,
        None => fit_opens,
    };
    // Unless told otherwise, one user may hold a quarter of all opens:
    // enough for heavy use, and three more like them still fit.
    let open_files_per_user = limits
        .max_open_files_per_user
        .unwrap_or(open_files_total / 4)
        .clamp(1, open_files_total);
    let open_files_per_connection = limits.max_open_files_per_connection.min(open_files_total);
    Budget {
        descriptors,
        max_connections,
        open_files_total,
        open_files_per_user,
        open_files_per_connection,
        lowered,
    }
}

fn clamp_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_limit_is_shared_out() {
        let b = budget(1024, &Limits::default());
        assert_eq!(b.max_connections, 240);
        assert_eq!(b.open_files_total, 1024 - 64 - 2 * 240);
        assert_eq!(b.open_files_per_user, 120);
        assert_eq!(b.open_files_per_connection, 480);
        assert_eq!(b.lowered, ["limits.max_connections 1024 -> 240"]);
        // Everything together stays below the limit.
        let used = RESERVED + 2 * u64::from(b.max_connections) + u64::from(b.open_files_total);
        assert!(used <= 1024);
    }

    #[test]
    fn a_large_limit_keeps_the_configured_caps() {
        let limits = Limits {
            max_open_files_per_user: Some(5000),
            ..Limits::default()
        };
        let b = budget(524_288, &limits);
        assert_eq!(b.max_connections, 1024);
        assert_eq!(b.open_files_total, 524_288 - 64 - 2048);
        assert_eq!(b.open_files_per_user, 5000);
        assert_eq!(b.open_files_per_connection, 16384);
        assert!(b.lowered.is_empty());
    }

    #[test]
    fn configured_caps_above_the_limit_are_lowered() {
        let limits = Limits {
            max_open_files_total: Some(100_000),
            max_open_files_per_user: Some(100_000),
            ..Limits::default()
        };
        let b = budget(8192, &limits);
        assert_eq!(b.open_files_total, 8192 - 64 - 2048);
        assert_eq!(b.open_files_per_user, b.open_files_total);
        assert_eq!(b.lowered.len(), 1, "{:?}", b.lowered);
    }

    #[test]
    fn raising_never_lowers() {
        let before = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let now = raise_limit().unwrap();
        assert!(before.current.is_none_or(|soft| now >= soft));
    }
}
