//! The record of a logon: every SESSION_SETUP that ends, in success or
//! failure, with who the client said it was, from where, by which
//! mechanism and with what status. The core only reports it (an
//! [`Event`](crate::Event) in the output); the engine counts it and
//! writes it as one line whose form is stable, for administrators and
//! fail2ban:
//!
//! ```text
//! logon failed user="bob" domain="WORKGROUP" client=192.0.2.7:50122 mech=ntlm kind=new status=STATUS_LOGON_FAILURE code=0xc000006d
//! ```

use std::fmt::{self, Write as _};
use std::net::SocketAddr;

use copyless_proto::status::{self, NtStatus};

/// How the client logged on, or tried to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Ntlm,
    Kerberos,
    /// NTLM without a user name (a null session).
    Anonymous,
    /// A guest logon.
    Guest,
    /// The request ended before the client chose a mechanism.
    Unknown,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Ntlm => "ntlm",
            Mechanism::Kerberos => "kerberos",
            Mechanism::Anonymous => "anonymous",
            Mechanism::Guest => "guest",
            Mechanism::Unknown => "unknown",
        }
    }
}

impl From<copyless_auth::Mechanism> for Mechanism {
    fn from(m: copyless_auth::Mechanism) -> Mechanism {
        match m {
            copyless_auth::Mechanism::Ntlm => Mechanism::Ntlm,
            copyless_auth::Mechanism::Kerberos => Mechanism::Kerberos,
            copyless_auth::Mechanism::Anonymous => Mechanism::Anonymous,
            copyless_auth::Mechanism::Unknown => Mechanism::Unknown,
        }
    }
}

/// What the SESSION_SETUP was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A new session.
    New,
    /// An established session's user logging on again (MS-SMB2 3.3.5.5.3).
    Reauth,
    /// Another connection bound to a session (multichannel).
    Bind,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::New => "new",
            Kind::Reauth => "reauth",
            Kind::Bind => "bind",
        }
    }
}

/// What a logon came to, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A named user logged on.
    Success,
    Guest,
    Anonymous,
    /// STATUS_LOGON_FAILURE: a wrong password, an unknown user, a ticket
    /// not accepted, an anonymous logon where guests are not allowed.
    BadCredentials,
    /// Any other failure: a malformed or unsupported token, a refused
    /// bind, too many sessions, a client that cannot encrypt...
    Failed,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::Success,
        Outcome::Guest,
        Outcome::Anonymous,
        Outcome::BadCredentials,
        Outcome::Failed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::Success => "success",
            Outcome::Guest => "guest",
            Outcome::Anonymous => "anonymous",
            Outcome::BadCredentials => "bad_credentials",
            Outcome::Failed => "failed",
        }
    }
}

/// One SESSION_SETUP that ended (not one answered
/// STATUS_MORE_PROCESSING_REQUIRED).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logon {
    pub client: SocketAddr,
    /// As the client sent them; empty when it sent none or they were
    /// never read.
    pub user: String,
    pub domain: String,
    pub mechanism: Mechanism,
    pub kind: Kind,
    pub status: NtStatus,
}

/// The most characters of a name the line shows: a client chooses them.
pub const MAX_SHOWN: usize = 64;

impl Logon {
    pub fn succeeded(&self) -> bool {
        self.status == status::SUCCESS
    }

    pub fn outcome(&self) -> Outcome {
        match (self.status, self.mechanism) {
            (status::SUCCESS, Mechanism::Guest) => Outcome::Guest,
            (status::SUCCESS, Mechanism::Anonymous) => Outcome::Anonymous,
            (status::SUCCESS, _) => Outcome::Success,
            (status::LOGON_FAILURE, _) => Outcome::BadCredentials,
            _ => Outcome::Failed,
        }
    }
}

impl fmt::Display for Logon {
    /// The log line, without the program's prefix. Names are quoted and
    /// escaped, so that nothing a client sends can end the line or pass
    /// for another field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let result = if self.succeeded() { "ok" } else { "failed" };
        let client = SocketAddr::new(self.client.ip().to_canonical(), self.client.port());
        write!(
            f,
            "logon {result} user={} domain={} client={client} mech={} kind={} status={} \
             code={:#010x}",
            Quoted(&self.user),
            Quoted(&self.domain),
            self.mechanism.name(),
            self.kind.name(),
            status::name(self.status).unwrap_or("STATUS_UNKNOWN"),
            self.status,
        )
    }
}

/// A client's text in double quotes: `"` and `\` escaped with `\`, and
/// anything but letters, digits and printable ASCII as `\u{..}`; at most
/// [`MAX_SHOWN`] characters, then `...` after the closing quote.
pub(crate) struct Quoted<'a>(pub(crate) &'a str);

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('"')?;
        for c in self.0.chars().take(MAX_SHOWN) {
            match c {
                '"' | '\\' => write!(f, "\\{c}")?,
                ' '..='~' => f.write_char(c)?,
                c if c.is_alphanumeric() => f.write_char(c)?,
                c => write!(f, "\\u{{{:x}}}", u32::from(c))?,
            }
        }
        f.write_char('"')?;
        if self.0.chars().nth(MAX_SHOWN).is_some() {
            f.write_str("...")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn logon(user: &str, status: NtStatus) -> Logon {
        Logon {
            client: "192.0.2.7:50122".parse().unwrap(),
            user: user.into(),
            domain: "WORKGROUP".into(),
            mechanism: Mechanism::Ntlm,
            kind: Kind::New,
            status,
        }
    }

    #[test]
    fn the_line() {
        assert_eq!(
            logon("bob", status::LOGON_FAILURE).to_string(),
            "logon failed user=\"bob\" domain=\"WORKGROUP\" client=192.0.2.7:50122 mech=ntlm \
             kind=new status=STATUS_LOGON_FAILURE code=0xc000006d"
        );
        let mut ok = logon("Jürgen", status::SUCCESS);
        ok.client = "[::ffff:192.0.2.7]:445".parse().unwrap();
        ok.mechanism = Mechanism::Kerberos;
        ok.kind = Kind::Reauth;
        ok.domain = "EXAMPLE.COM".into();
        assert_eq!(
            ok.to_string(),
            "logon ok user=\"Jürgen\" domain=\"EXAMPLE.COM\" client=192.0.2.7:445 \
             mech=kerberos kind=reauth status=STATUS_SUCCESS code=0x00000000"
        );
        let mut v6 = logon("", 0xC000_FFFF);
        v6.client = "[fd00::1]:50000".parse().unwrap();
        v6.mechanism = Mechanism::Unknown;
        assert_eq!(
            v6.to_string(),
            "logon failed user=\"\" domain=\"WORKGROUP\" client=[fd00::1]:50000 mech=unknown \
             kind=new status=STATUS_UNKNOWN code=0xc000ffff"
        );
    }

    #[test]
    fn a_client_cannot_forge_a_line_or_a_field() {
        let forged = "x\" domain=\"\" client=10.9.9.9:1 mech=ntlm\ncopyless: logon ok user=\"root";
        let line = logon(forged, status::LOGON_FAILURE).to_string();
        assert!(!line.contains('\n'), "{line}");
        assert!(line.starts_with(
            "logon failed user=\"x\\\" domain=\\\"\\\" client=10.9.9.9:1 mech=ntlm\\u{a}copyless"
        ));
        // The real fields follow the user's quoted text, once each.
        assert_eq!(line.matches(" client=192.0.2.7:50122 ").count(), 1);
        // Control and invisible characters (a bidi override) are escaped.
        let sneaky = logon("a\r\u{1b}[2J\u{202e}b\\", status::LOGON_FAILURE).to_string();
        assert!(
            sneaky.contains("user=\"a\\u{d}\\u{1b}[2J\\u{202e}b\\\\\" "),
            "{sneaky}"
        );
    }

    #[test]
    fn long_names_are_cut() {
        let long = "a".repeat(1000);
        let line = logon(&long, status::LOGON_FAILURE).to_string();
        assert!(line.contains(&format!("user=\"{}\"... ", "a".repeat(MAX_SHOWN))));
        assert!(line.len() < 300, "{line}");
        let exact = "b".repeat(MAX_SHOWN);
        let line = logon(&exact, status::LOGON_FAILURE).to_string();
        assert!(line.contains(&format!("user=\"{exact}\" ")));
    }

    #[test]
    fn outcomes() {
        let mut l = logon("bob", status::SUCCESS);
        assert_eq!(l.outcome(), Outcome::Success);
        l.mechanism = Mechanism::Anonymous;
        assert_eq!(l.outcome(), Outcome::Anonymous);
        l.mechanism = Mechanism::Guest;
        assert_eq!(l.outcome(), Outcome::Guest);
        l.status = status::LOGON_FAILURE;
        assert_eq!(l.outcome(), Outcome::BadCredentials);
        l.status = status::INVALID_PARAMETER;
        assert_eq!(l.outcome(), Outcome::Failed);
    }
}
