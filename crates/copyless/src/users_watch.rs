//! Keeps the running server's users in step with the user store, so that
//! `copyless user add/del/passwd` need no restart: a thread looks at the
//! file every second and reloads it when it changed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use copyless_auth::{LiveUsers, UserError};

const INTERVAL: Duration = Duration::from_secs(1);

/// Starts the thread that refreshes `users`; it runs as long as the process.
pub fn start(users: Arc<LiveUsers>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("users-watch".into())
        .spawn(move || {
            let mut log = ReloadLog::default();
            loop {
                std::thread::sleep(INTERVAL);
                let outcome = users.refresh();
                if let Some(line) = log.line(outcome, users.users().len()) {
                    eprintln!("copyless: {line}");
                }
            }
        })?;
    Ok(())
}

/// Decides what a refresh is worth saying: every reload, and a failure
/// only when it differs from the one before (a store left broken would
/// otherwise fill the log every second).
#[derive(Default)]
struct ReloadLog {
    last_error: Option<String>,
}

impl ReloadLog {
    fn line(&mut self, outcome: Result<bool, UserError>, users: usize) -> Option<String> {
        match outcome {
            Ok(reloaded) => {
                self.last_error = None;
                reloaded.then(|| format!("user store reloaded: {}", count(users)))
            }
            Err(e) => {
                let message = e.to_string();
                if self.last_error.as_ref() == Some(&message) {
                    return None;
                }
                self.last_error = Some(message.clone());
                Some(format!(
                    "user store not reloaded, the {} loaded before stay in force: {message}",
                    count(users)
                ))
            }
        }
    }
}

fn count(users: usize) -> String {
    if users == 1 {
        "1 user".to_string()
    } else {
        format!("{users} users")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn corrupt(line: usize) -> UserError {
        UserError::Corrupt {
            path: PathBuf::from("/s/users"),
            line,
            message: "expected name:NT-hash".into(),
        }
    }

    #[test]
    fn reloads_are_logged_and_each_failure_once() {
        let mut log = ReloadLog::default();
        assert_eq!(log.line(Ok(false), 2), None);
        assert_eq!(
            log.line(Ok(true), 3).as_deref(),
            Some("user store reloaded: 3 users")
        );
        assert_eq!(
            log.line(Ok(true), 1).as_deref(),
            Some("user store reloaded: 1 user")
        );

        let first = log.line(Err(corrupt(2)), 1).unwrap();
        assert!(first.contains("the 1 user loaded before stay"), "{first}");
        assert!(
            first.contains("/s/users:2: expected name:NT-hash"),
            "{first}"
        );
        assert_eq!(log.line(Err(corrupt(2)), 1), None, "said once");
        assert!(log.line(Err(corrupt(5)), 1).is_some(), "a new failure");
        assert_eq!(log.line(Err(corrupt(5)), 1), None);

        // Once it loads again, the same failure is news again.
        assert!(log.line(Ok(false), 1).is_none());
        assert!(log.line(Err(corrupt(5)), 1).is_some());
    }
}
