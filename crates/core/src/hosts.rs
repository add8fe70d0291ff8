//! Who may connect, by client address: `hosts_allow` and `hosts_deny`,
//! for the whole server (the engine drops a refused client at accept) and
//! per share (TREE_CONNECT answers STATUS_ACCESS_DENIED). The rules are
//! Samba's `hosts allow` and `hosts deny`: with only an allow list, only
//! the clients on it; with only a deny list, everyone but the clients on
//! it; with both, the allow list takes precedence, and a client on
//! neither is let in.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An address, or a network in CIDR form (`192.168.1.0/24`,
/// `fd00::/8`). IPv4 addresses written as IPv4-mapped IPv6
/// (`::ffff:192.168.1.0/120`) are kept as IPv4, as clients are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    /// With the bits past the prefix cleared.
    base: IpAddr,
    prefix: u8,
}

impl Network {
    /// `prefix` bits of `addr`; None when the prefix is longer than the
    /// address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Network> {
        let (addr, prefix) = match addr {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) if prefix >= 96 => (IpAddr::V4(v4), prefix - 96),
                _ => (addr, prefix),
            },
            IpAddr::V4(_) => (addr, prefix),
        };
        let base = match addr {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask32(prefix)?)),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask128(prefix)?)),
        };
        Some(Network { base, prefix })
    }

    /// Whether `ip` is in this network; an IPv4-mapped IPv6 address (a
    /// client of a dual-stack listener) counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.base, ip.to_canonical()) {
            (IpAddr::V4(base), IpAddr::V4(ip)) => {
                mask32(self.prefix).is_some_and(|m| u32::from(ip) & m == u32::from(base))
            }
            (IpAddr::V6(base), IpAddr::V6(ip)) => {
                mask128(self.prefix).is_some_and(|m| u128::from(ip) & m == u128::from(base))
            }
            _ => false,
        }
    }
}

fn mask32(prefix: u8) -> Option<u32> {
    match prefix {
        0 => Some(0),
        1..=32 => Some(u32::MAX << (32 - u32::from(prefix))),
        _ => None,
    }
}

fn mask128(prefix: u8) -> Option<u128> {
    match prefix {
        0 => Some(0),
        1..=128 => Some(u128::MAX << (128 - u32::from(prefix))),
        _ => None,
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let full = match self.base {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        };
        if self.prefix == full {
            write!(f, "{}", self.base)
        } else {
            write!(f, "{}/{}", self.base, self.prefix)
        }
    }
}

/// Why a text is no [`Network`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadNetwork(String);

impl fmt::Display for BadNetwork {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadNetwork {}

impl FromStr for Network {
    type Err = BadNetwork;

    /// `ADDR` or `ADDR/PREFIX`; bits of ADDR past the prefix are ignored
    /// (`192.168.1.7/24` is `192.168.1.0/24`), as Samba ignores them.
    fn from_str(text: &str) -> Result<Network, BadNetwork> {
        let bad = |why: &str| {
            BadNetwork(format!(
                "{text:?} is not an address or a network: {why} (write ADDR or ADDR/PREFIX, \
                 such as 192.168.1.0/24 or fd00::/8)"
            ))
        };
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| bad("not an IPv4 or IPv6 address"))?;
        let full = if addr.is_ipv4() { 32 } else { 128 };
        let prefix =
            match prefix {
                None => full,
                Some(p) => p.parse::<u8>().ok().filter(|&p| p <= full).ok_or_else(|| {
                    bad(&format!("the prefix must be a number of bits, 0 to {full}"))
                })?,
            };
        Network::new(addr, prefix).ok_or_else(|| bad("the prefix is too long"))
    }
}

/// `hosts_allow` and `hosts_deny` of the server or of a share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFilter {
    /// None when not set: then only `deny` decides. Set but empty lets
    /// nobody in (unless `deny` is set and does not match).
    pub allow: Option<Vec<Network>>,
    /// Empty when not set.
    pub deny: Vec<Network>,
}

impl HostFilter {
    /// Whether a client at `ip` is let in.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let on = |list: &[Network]| list.iter().any(|n| n.contains(ip));
        match &self.allow {
            None => !on(&self.deny),
            Some(allow) if self.deny.is_empty() => on(allow),
            Some(allow) => on(allow) || !on(&self.deny),
        }
    }

    /// Neither list is set: everyone is let in without a look.
    pub fn is_open(&self) -> bool {
        self.allow.is_none() && self.deny.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> Network {
        text.parse().unwrap()
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn filter(allow: Option<&[&str]>, deny: &[&str]) -> HostFilter {
        HostFilter {
            allow: allow.map(|a| a.iter().map(|n| net(n)).collect()),
            deny: deny.iter().map(|n| net(n)).collect(),
        }
    }

    #[test]
    fn networks_parse_and_match() {
        let lan = net("192.168.1.0/24");
        assert!(lan.contains(ip("192.168.1.200")));
        assert!(!lan.contains(ip("192.168.2.1")));
        assert!(!lan.contains(ip("fd00::1")));
        // A client of a dual-stack listener shows as IPv4-mapped IPv6.
        assert!(lan.contains(ip("::ffff:192.168.1.9")));
        // Bits past the prefix are ignored, as Samba ignores them.
        assert_eq!(net("192.168.1.77/24"), lan);
        assert_eq!(net("192.168.1.77/24").to_string(), "192.168.1.0/24");
        // IPv4-mapped networks are IPv4 networks.
        assert_eq!(net("::ffff:192.168.1.0/120"), lan);
        assert_eq!(net("::ffff:10.0.0.1"), net("10.0.0.1"));

        let one = net("127.0.0.1");
        assert_eq!(one.to_string(), "127.0.0.1");
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));

        let v6 = net("fd00::/8");
        assert!(v6.contains(ip("fd12:3456::1")));
        assert!(!v6.contains(ip("fe80::1")));
        assert!(net("::1").contains(ip("::1")));

        let everyone = net("0.0.0.0/0");
        assert!(everyone.contains(ip("8.8.8.8")) && !everyone.contains(ip("::1")));
        assert!(net("::/0").contains(ip("2001:db8::1")));
    }

    #[test]
    fn bad_networks_say_why() {
        for (text, why) in [
            ("192.168.1.", "not an IPv4 or IPv6 address"),
            ("nas.example.org", "not an IPv4 or IPv6 address"),
            ("", "not an IPv4 or IPv6 address"),
            ("10.0.0.0/33", "0 to 32"),
            ("10.0.0.0/255.0.0.0", "0 to 32"),
            ("fd00::/129", "0 to 128"),
            ("10.0.0.0/", "0 to 32"),
            ("10.0.0.0/-1", "0 to 32"),
        ] {
            let err = text.parse::<Network>().unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
            assert!(err.contains("ADDR/PREFIX"), "{text}: {err}");
        }
    }

    #[test]
    fn samba_rules() {
        let lan = "192.168.1.0/24";
        let (inside, outside) = (ip("192.168.1.5"), ip("10.0.0.1"));

        let open = HostFilter::default();
        assert!(open.is_open() && open.admits(outside));

        // Only an allow list: only those on it.
        let f = filter(Some(&[lan]), &[]);
        assert!(!f.is_open());
        assert!(f.admits(inside) && !f.admits(outside));
        assert!(!f.admits(ip("127.0.0.1")), "loopback has no exception");

        // Only a deny list: everyone but those on it.
        let f = filter(None, &[lan]);
        assert!(!f.admits(inside) && f.admits(outside));

        // Both: allow takes precedence; a client on neither is let in.
        let f = filter(Some(&["192.168.1.5"]), &[lan]);
        assert!(f.admits(inside));
        assert!(!f.admits(ip("192.168.1.6")));
        assert!(f.admits(outside));

        // Samba's way to let in only a few: deny everyone else.
        let f = filter(Some(&[lan]), &["0.0.0.0/0", "::/0"]);
        assert!(f.admits(inside) && !f.admits(outside) && !f.admits(ip("fd00::1")));

        // An allow list set but empty lets nobody in.
        let f = filter(Some(&[]), &[]);
        assert!(!f.admits(inside) && !f.admits(outside));
    }
}
