//! How much the server says on standard error (`[log] level`), which a
//! reload changes at once: every part of the server asks [`logs`] before
//! it writes a line of a level.

use std::sync::atomic::{AtomicU8, Ordering};

/// From least to most said; each level says what those before it say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// What stops the server, or part of it.
    Error,
    /// What goes wrong without stopping it: failed logons, a share not
    /// served, a client refused or misbehaving.
    Warning,
    /// What it does: start, reloads, each logon.
    Info,
    /// Each connection as it comes and goes.
    Debug,
}

impl LogLevel {
    pub const ALL: [LogLevel; 4] = [
        LogLevel::Error,
        LogLevel::Warning,
        LogLevel::Info,
        LogLevel::Debug,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warning => "warning",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
        }
    }

    pub fn named(name: &str) -> Option<LogLevel> {
        LogLevel::ALL.into_iter().find(|l| l.name() == name)
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);

pub fn set_log_level(level: LogLevel) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether lines of `level` are written now.
pub fn logs(level: LogLevel) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Writes `copyless: <message>` if lines of `level` are written.
pub fn log(level: LogLevel, message: impl FnOnce() -> String) {
    if logs(level) {
        eprintln!("copyless: {}", message());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_by_name_and_order() {
        for level in LogLevel::ALL {
            assert_eq!(LogLevel::named(level.name()), Some(level));
        }
        assert_eq!(LogLevel::named("verbose"), None);
        assert!(LogLevel::Error < LogLevel::Debug);
        // The default says what it does, not each connection.
        assert!(logs(LogLevel::Info) && !logs(LogLevel::Debug));
    }
}
