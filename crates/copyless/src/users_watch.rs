//! Keeps the running server's users in step with the user store, so that
//! `copyless user add/del/passwd/link` need no restart: a thread looks at
//! the file every second and reloads it when it changed, and looks the
//! users' Unix accounts up again when the store or the system's account
//! files changed.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use copyless_auth::userstore::shell_quote;
use copyless_auth::{LiveUsers, UnixError, UserError};

const INTERVAL: Duration = Duration::from_secs(1);

/// Says which users have no Unix account now, then starts the thread that
/// refreshes `users`; it runs as long as the process.
pub fn start(users: Arc<LiveUsers>) -> io::Result<()> {
    let mut accounts = AccountLog::default();
    accounts.log(users.unresolved());
    std::thread::Builder::new()
        .name("users-watch".into())
        .spawn(move || {
            let mut log = ReloadLog::default();
            loop {
                std::thread::sleep(INTERVAL);
                let outcome = users.refresh();
                let resolved = matches!(outcome, Ok(done) if done.resolved);
                let reloaded = outcome.map(|done| done.reloaded);
                if let Some(line) = log.line(reloaded, users.users().len()) {
                    eprintln!("copyless: {line}");
                }
                if resolved {
                    accounts.log(users.unresolved());
                }
            }
        })?;
    Ok(())
}

/// Says which users have no Unix account, each once until that changes:
/// the same list every second would fill the log.
#[derive(Default)]
struct AccountLog {
    said: Vec<(String, UnixError)>,
}

impl AccountLog {
    fn log(&mut self, unresolved: Vec<(String, UnixError)>) {
        for line in self.lines(unresolved) {
            eprintln!("copyless: {line}");
        }
    }

    fn lines(&mut self, unresolved: Vec<(String, UnixError)>) -> Vec<String> {
        let news = unresolved
            .iter()
            .filter(|entry| !self.said.contains(entry))
            .map(|(user, err)| {
                format!(
                    "user {user}: {err}; {user} cannot log in until linked \
                     (copyless user link {} --unix-user ACCOUNT)",
                    shell_quote(user)
                )
            })
            .collect();
        self.said = unresolved;
        news
    }
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

    fn missing(user: &str, account: &str) -> (String, UnixError) {
        (user.to_string(), UnixError::NotFound(account.to_string()))
    }

    #[test]
    fn each_missing_account_is_logged_once_until_it_changes() {
        let mut log = AccountLog::default();
        assert!(log.lines(Vec::new()).is_empty());
        assert_eq!(
            log.lines(vec![missing("alice", "alice")]),
            [
                "user alice: no Unix account \"alice\"; alice cannot log in until linked \
                 (copyless user link alice --unix-user ACCOUNT)"
            ]
        );
        assert!(log.lines(vec![missing("alice", "alice")]).is_empty());
        let lines = log.lines(vec![
            missing("alice", "alice"),
            missing("John Smith", "john"),
        ]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("user John Smith: no Unix account \"john\"; John Smith"),
            "{lines:?}"
        );
        assert!(
            lines[0].ends_with("(copyless user link 'John Smith' --unix-user ACCOUNT)"),
            "{lines:?}"
        );
        // Linked to another missing account: news again.
        assert_eq!(log.lines(vec![missing("alice", "al")]).len(), 1);
        // Found, then missing again: news again.
        assert!(log.lines(Vec::new()).is_empty());
        assert_eq!(log.lines(vec![missing("alice", "al")]).len(), 1);
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
