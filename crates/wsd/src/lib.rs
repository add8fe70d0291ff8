//! The messages of a WS-Discovery target service and its DPWS metadata
//! exchange, as Windows speaks them: WS-Discovery of April 2005 (the
//! version of Windows' Function Discovery, not the OASIS 1.1 one),
//! WS-Addressing of August 2004, WS-Transfer Get and the Devices Profile
//! of February 2006.
//!
//! [`parse`] reads a received message (a Probe, a Resolve or a Get) and
//! keeps only what a target service answers with; the `build` functions
//! write the messages it sends (Hello, Bye, ProbeMatches, ResolveMatches,
//! GetResponse). Nothing here does I/O, keeps state or reads a clock: the
//! caller brings the addresses, the message ids and the sequence numbers.

mod build;
mod parse;

pub use build::{bye, get_response, hello, probe_matches, resolve_matches, Metadata, Sequence};
pub use parse::{parse, Error, Message, Probe, Request, TypeName, MAX_DEPTH, MAX_FIELD, MAX_TYPES};

use std::fmt;
use std::net::Ipv4Addr;

/// The IPv4 multicast group of WS-Discovery.
pub const MULTICAST_V4: Ipv4Addr = Ipv4Addr::new(239, 255, 255, 250);
/// The UDP port of WS-Discovery, for multicast and its unicast replies.
pub const UDP_PORT: u16 = 3702;
/// The TCP port Windows uses for the metadata exchange over HTTP.
pub const HTTP_PORT: u16 = 5357;
/// The largest message read, over UDP or HTTP. A Probe, a Resolve or a
/// Get is well under 2 KiB; wsdd takes 32,767 bytes, and so do we.
pub const MAX_MESSAGE: usize = 32 * 1024 - 1;

pub const SOAP_NS: &str = "http://www.w3.org/2003/05/soap-envelope";
pub const WSA_NS: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing";
pub const WSD_NS: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery";
pub const WSX_NS: &str = "http://schemas.xmlsoap.org/ws/2004/09/mex";
pub const WSDP_NS: &str = "http://schemas.xmlsoap.org/ws/2006/02/devprof";
pub const PNPX_NS: &str = "http://schemas.microsoft.com/windows/pnpx/2005/10";
pub const PUB_NS: &str = "http://schemas.microsoft.com/windows/pub/2005/07";

pub const ACTION_HELLO: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello";
pub const ACTION_BYE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Bye";
pub const ACTION_PROBE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe";
pub const ACTION_PROBE_MATCHES: &str =
    "http://schemas.xmlsoap.org/ws/2005/04/discovery/ProbeMatches";
pub const ACTION_RESOLVE: &str = "http://schemas.xmlsoap.org/ws/2005/04/discovery/Resolve";
pub const ACTION_RESOLVE_MATCHES: &str =
    "http://schemas.xmlsoap.org/ws/2005/04/discovery/ResolveMatches";
pub const ACTION_GET: &str = "http://schemas.xmlsoap.org/ws/2004/09/transfer/Get";
pub const ACTION_GET_RESPONSE: &str = "http://schemas.xmlsoap.org/ws/2004/09/transfer/GetResponse";

/// Where multicast discovery messages are addressed (WS-Discovery 2.4).
pub const TO_DISCOVERY: &str = "urn:schemas-xmlsoap-org:ws:2005:04:discovery";
/// Where replies are addressed: back to whoever asked.
pub const TO_ANONYMOUS: &str = "http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous";

/// A UUID, as WS-Addressing message ids and endpoint references carry it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Uuid([u8; 16]);

impl Uuid {
    /// A version 4 (random) UUID from 16 random bytes; six of their bits
    /// are overwritten with the version and the variant.
    pub fn random_from(mut bytes: [u8; 16]) -> Uuid {
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Uuid(bytes)
    }

    /// As a URN: `urn:uuid:xxxxxxxx-xxxx-...`.
    pub fn urn(&self) -> String {
        format!("urn:uuid:{self}")
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text() {
        let u = Uuid::random_from([0xff; 16]);
        assert_eq!(u.to_string(), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let u = Uuid::random_from([0; 16]);
        assert_eq!(u.urn(), "urn:uuid:00000000-0000-4000-8000-000000000000");
    }
}
