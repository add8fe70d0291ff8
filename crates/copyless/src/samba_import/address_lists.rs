//! Samba's `hosts allow` and `hosts deny` lists (lib/util/access.c) read
//! as copyless's `hosts_allow` and `hosts_deny`: the forms that name
//! addresses are converted to addresses and CIDR networks; host names,
//! netgroups and `EXCEPT` are not, and each is said.

use std::net::{IpAddr, Ipv4Addr};

use copyless_core::hosts::Network;

use super::smbconf::split_list;

/// A list as far as copyless can take it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Converted {
    pub networks: Vec<Network>,
    /// Items left out, each with why.
    pub left_out: Vec<(String, &'static str)>,
    /// What followed `EXCEPT`, left out (empty when there was none).
    pub except: Vec<String>,
}

/// Reads one list. With `EXCEPT`, `networks` holds what came before it.
pub fn convert(value: &str) -> Converted {
    let mut out = Converted::default();
    let mut items = split_list(value).into_iter();
    for item in items.by_ref() {
        if item.eq_ignore_ascii_case("EXCEPT") {
            break;
        }
        match networks(&item) {
            Ok(found) => {
                for n in found {
                    if !out.networks.contains(&n) {
                        out.networks.push(n);
                    }
                }
            }
            Err(why) => out.left_out.push((item, why)),
        }
    }
    out.except = items.collect();
    out
}

/// The networks one item of a list stands for, or why it has none.
fn networks(item: &str) -> Result<Vec<Network>, &'static str> {
    const HOST_NAME: &str = "a host name: copyless matches client addresses only";
    const NOT_AN_ADDRESS: &str = "not an address or a network";
    let all = |v: &[(IpAddr, u8)]| {
        v.iter()
            .filter_map(|&(ip, prefix)| Network::new(ip, prefix))
            .collect()
    };
    if item.eq_ignore_ascii_case("ALL") {
        return Ok(all(&[
            (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
            (IpAddr::V6(0.into()), 0),
        ]));
    }
    if item.eq_ignore_ascii_case("localhost") {
        return Ok(all(&[
            (IpAddr::V4(Ipv4Addr::LOCALHOST), 32),
            (IpAddr::V6(1.into()), 128),
        ]));
    }
    if item.starts_with('@') {
        return Err("a NIS netgroup: copyless matches client addresses only");
    }
    if let Some(prefix) = item.strip_suffix('.') {
        // `192.168.1.`: every address that begins so.
        if !prefix.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(HOST_NAME);
        }
        let octets: Vec<u8> = prefix
            .split('.')
            .map(|o| o.parse().map_err(|_| NOT_AN_ADDRESS))
            .collect::<Result<_, _>>()?;
        if octets.is_empty() || octets.len() > 3 {
            return Err(NOT_AN_ADDRESS);
        }
        let mut full = [0u8; 4];
        full[..octets.len()].copy_from_slice(&octets);
        return Ok(all(&[(IpAddr::from(full), 8 * octets.len() as u8)]));
    }
    if let Some((addr, mask)) = item.split_once('/') {
        // ADDR/MASK, the mask dotted (`255.255.255.0`) or in bits.
        if let (Ok(ip), Ok(mask)) = (addr.parse::<Ipv4Addr>(), mask.parse::<Ipv4Addr>()) {
            let bits = u32::from(mask);
            if bits.leading_ones() + bits.trailing_zeros() != 32 {
                return Err("a network mask whose bits are not contiguous");
            }
            return Ok(all(&[(IpAddr::V4(ip), bits.leading_ones() as u8)]));
        }
    }
    match item.parse::<Network>() {
        Ok(n) => Ok(vec![n]),
        Err(_) if item.contains(['*', '?']) || item.chars().any(|c| c.is_ascii_alphabetic()) => {
            Err(HOST_NAME)
        }
        Err(_) => Err(NOT_AN_ADDRESS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(c: &Converted) -> Vec<String> {
        c.networks.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn samba_forms_become_networks() {
        let c = convert(
            "192.168.1. 10., 172.16.0.0/255.240.0.0\t150.203.15.0/24 127.0.0.1 fe80::/10 \
             ::1 2001:db8::/32 192.168.1.",
        );
        assert_eq!(
            shown(&c),
            [
                "192.168.1.0/24",
                "10.0.0.0/8",
                "172.16.0.0/12",
                "150.203.15.0/24",
                "127.0.0.1",
                "fe80::/10",
                "::1",
                "2001:db8::/32"
            ]
        );
        assert!(c.left_out.is_empty() && c.except.is_empty());
        assert_eq!(shown(&convert("ALL")), ["0.0.0.0/0", "::/0"]);
        assert_eq!(shown(&convert("LocalHost")), ["127.0.0.1", "::1"]);
    }

    #[test]
    fn names_netgroups_and_except_are_left_out() {
        let c = convert(
            "nas.example.org .example.org @trusted 10.0.0.0/255.0.255.0 *.lan 1.2.3.4.5. \
             300.1. 192.168.1. EXCEPT 192.168.1.66",
        );
        assert_eq!(shown(&c), ["192.168.1.0/24"]);
        assert_eq!(
            c.left_out,
            [
                (
                    "nas.example.org".into(),
                    "a host name: copyless matches client addresses only"
                ),
                (
                    ".example.org".into(),
                    "a host name: copyless matches client addresses only"
                ),
                (
                    "@trusted".into(),
                    "a NIS netgroup: copyless matches client addresses only"
                ),
                (
                    "10.0.0.0/255.0.255.0".into(),
                    "a network mask whose bits are not contiguous"
                ),
                (
                    "*.lan".into(),
                    "a host name: copyless matches client addresses only"
                ),
                ("1.2.3.4.5.".into(), "not an address or a network"),
                ("300.1.".into(), "not an address or a network"),
            ]
        );
        assert_eq!(c.except, ["192.168.1.66"]);
    }
}
