//! Being found on the local network: mDNS/DNS-SD (`_smb._tcp`, and
//! `_device-info._tcp` for Finder's icon) for macOS and Linux, and
//! WS-Discovery with its metadata exchange for Windows' Network folder.
//!
//! Both run on threads of their own and only read the config: nothing
//! here touches the SMB engine, and a failure to announce is a warning,
//! never a reason not to serve. They announce on the interfaces the SMB
//! listeners cover: a wildcard listener covers every interface but the
//! loopback (0.0.0.0 the IPv4 addresses, [::] both kinds), an address
//! covers its own interface, and a loopback listener covers nothing,
//! since no other machine could reach it anyway.

mod http;
mod mdns;
mod wsd;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::config::Config;
use copyless_wsd::Uuid;

/// The running announcers; [`Discovery::stop`] says goodbye.
pub struct Discovery {
    mdns: Option<mdns::Announcer>,
    wsd: Option<wsd::Responder>,
}

/// Starts what the config asks for, on the interfaces `listening` (the
/// SMB listeners' bound addresses) covers. Problems are reported on
/// standard error and leave that part off.
pub fn start(config: &Config, listening: &[SocketAddr], machine_sid: [u32; 3]) -> Discovery {
    let mut discovery = Discovery {
        mdns: None,
        wsd: None,
    };
    let settings = &config.discovery;
    if !settings.mdns && !settings.wsd {
        return discovery;
    }
    let reach = Reach::of(listening);
    let Some(port) = reach.port else {
        eprintln!(
            "copyless: discovery: the server listens on loopback addresses only; nothing to \
             announce"
        );
        return discovery;
    };
    if settings.mdns {
        match mdns::Announcer::start(&reach, &config.server_name, port, &settings.model) {
            Ok(announcer) => discovery.mdns = Some(announcer),
            Err(e) => eprintln!("copyless: discovery: mDNS not started: {e}"),
        }
    }
    if settings.wsd {
        let device = wsd::Device::new(
            endpoint_uuid(machine_sid),
            &config.server_name,
            &settings.workgroup,
        );
        match wsd::Responder::start(reach, device) {
            Ok(responder) => discovery.wsd = Some(responder),
            Err(e) => eprintln!("copyless: discovery: WS-Discovery not started: {e}"),
        }
    }
    discovery
}

impl Discovery {
    /// Announces that the server is going (mDNS goodbyes, WS-Discovery
    /// Bye) and ends the threads; takes a second or so at most.
    pub fn stop(self) {
        if let Some(announcer) = self.mdns {
            announcer.stop();
        }
        if let Some(responder) = self.wsd {
            responder.stop();
        }
    }
}

/// The WS-Discovery endpoint reference must stay the same across
/// restarts (Windows keys what it learnt by it) and differ between
/// servers: the machine SID, random once and kept in the state
/// directory, is both.
fn endpoint_uuid(machine_sid: [u32; 3]) -> Uuid {
    let mut bytes = [0u8; 16];
    for (chunk, part) in bytes.chunks_exact_mut(4).zip(machine_sid) {
        chunk.copy_from_slice(&part.to_le_bytes());
    }
    // The last four bytes tell it apart from any other use of the SID.
    bytes[12..].copy_from_slice(b"wsd1");
    Uuid::random_from(bytes)
}

/// Which local addresses the SMB listeners answer on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Every IPv4 address (0.0.0.0, or [::], which Linux makes dual-stack
    /// unless told otherwise).
    all_v4: bool,
    /// Every IPv6 address ([::]).
    all_v6: bool,
    /// Addresses listened on one by one.
    addrs: Vec<IpAddr>,
    /// The port of the first listener that is not on the loopback; None
    /// when there is none.
    port: Option<u16>,
}

impl Reach {
    pub fn of(listening: &[SocketAddr]) -> Reach {
        let mut reach = Reach::default();
        for addr in listening {
            let ip = addr.ip().to_canonical();
            if ip.is_loopback() {
                continue;
            }
            reach.port.get_or_insert(addr.port());
            match ip {
                IpAddr::V4(v4) if v4.is_unspecified() => reach.all_v4 = true,
                IpAddr::V6(v6) if v6.is_unspecified() => {
                    reach.all_v4 = true;
                    reach.all_v6 = true;
                }
                _ => reach.addrs.push(ip),
            }
        }
        reach
    }

    /// Whether a local address is one the listeners answer on.
    pub fn covers(&self, ip: IpAddr) -> bool {
        !ip.is_loopback()
            && match ip {
                IpAddr::V4(_) if self.all_v4 => true,
                IpAddr::V6(_) if self.all_v6 => true,
                _ => self.addrs.contains(&ip),
            }
    }

    /// The addresses an HTTP listener must bind to reach the same
    /// interfaces: the listeners' own, wildcards included.
    pub fn bind_addrs(&self) -> Vec<IpAddr> {
        let mut out = Vec::new();
        if self.all_v6 {
            // Dual-stack, as the SMB listener on [::] is.
            out.push(IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED));
        } else if self.all_v4 {
            out.push(IpAddr::from(Ipv4Addr::UNSPECIFIED));
        }
        for ip in &self.addrs {
            let wildcard = match ip {
                IpAddr::V4(_) => self.all_v4,
                IpAddr::V6(_) => self.all_v6,
            };
            if !wildcard {
                out.push(*ip);
            }
        }
        out
    }
}

/// An IPv4 address of an interface that is up, with what WS-Discovery
/// needs to know about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub name: String,
    pub index: u32,
    pub addr: Ipv4Addr,
    pub netmask: Ipv4Addr,
}

impl Link {
    /// Whether `peer` is on this link's subnet.
    pub fn on_link(&self, peer: Ipv4Addr) -> bool {
        let mask = u32::from(self.netmask);
        u32::from(peer) & mask == u32::from(self.addr) & mask
    }
}

/// The IPv4 addresses the listeners cover, on interfaces that are up
/// and can multicast (not loopbacks, not point-to-point tunnels).
pub fn covered_v4_links(reach: &Reach) -> std::io::Result<Vec<Link>> {
    let mut links = Vec::new();
    for interface in if_addrs::get_if_addrs()? {
        let if_addrs::IfAddr::V4(v4) = &interface.addr else {
            continue;
        };
        if !interface.is_oper_up()
            || interface.is_loopback()
            || interface.is_p2p()
            || !reach.covers(IpAddr::V4(v4.ip))
        {
            continue;
        }
        let Some(index) = interface.index else {
            continue;
        };
        links.push(Link {
            name: interface.name.clone(),
            index,
            addr: v4.ip,
            netmask: v4.netmask,
        });
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn reach_of_listeners() {
        let loopback = Reach::of(&addrs(&["127.0.0.1:445", "[::1]:445"]));
        assert_eq!(loopback.port, None);
        assert!(!loopback.covers("10.0.0.1".parse().unwrap()));

        let v4 = Reach::of(&addrs(&["127.0.0.1:1", "0.0.0.0:4445"]));
        assert_eq!(v4.port, Some(4445));
        assert!(v4.covers("10.0.0.1".parse().unwrap()));
        assert!(!v4.covers("fe80::1".parse().unwrap()));
        assert!(!v4.covers("127.0.0.1".parse().unwrap()));
        assert_eq!(v4.bind_addrs(), vec!["0.0.0.0".parse::<IpAddr>().unwrap()]);

        let both = Reach::of(&addrs(&["[::]:445"]));
        assert!(both.covers("10.0.0.1".parse().unwrap()));
        assert!(both.covers("fe80::1".parse().unwrap()));
        assert_eq!(both.bind_addrs(), vec!["::".parse::<IpAddr>().unwrap()]);

        let one = Reach::of(&addrs(&["192.168.1.5:445", "[::ffff:192.168.2.5]:445"]));
        assert!(one.covers("192.168.1.5".parse().unwrap()));
        assert!(one.covers("192.168.2.5".parse().unwrap()));
        assert!(!one.covers("192.168.1.6".parse().unwrap()));
        assert_eq!(one.bind_addrs().len(), 2);
    }

    #[test]
    fn links() {
        let link = Link {
            name: "eth0".into(),
            index: 2,
            addr: Ipv4Addr::new(192, 168, 1, 5),
            netmask: Ipv4Addr::new(255, 255, 255, 0),
        };
        assert!(link.on_link(Ipv4Addr::new(192, 168, 1, 200)));
        assert!(!link.on_link(Ipv4Addr::new(192, 168, 2, 200)));
        assert!(!link.on_link(Ipv4Addr::new(8, 8, 8, 8)));
    }

    #[test]
    fn endpoint_is_stable_per_machine() {
        let a = endpoint_uuid([1, 2, 3]);
        assert_eq!(a, endpoint_uuid([1, 2, 3]));
        assert_ne!(a, endpoint_uuid([1, 2, 4]));
        assert_eq!(a.to_string(), "01000000-0200-4000-8300-000077736431");
    }
}
