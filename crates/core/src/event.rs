//! What the core tells the engine has happened, beside replies and
//! intents: things to count and to log. The core writes no log itself
//! (it does no I/O); the engine decides how, and how often.

use crate::audit::Audit;
use crate::logon::Logon;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A SESSION_SETUP ended, in success or failure.
    Logon(Logon),
    /// Something a share's audit trail keeps.
    Audit(Audit),
}
