//! Writing the messages a target service sends. Every value from outside
//! (a message id to relate to, a name from the config) is escaped, so no
//! input can add markup to a reply.

use quick_xml::escape::escape;
use std::fmt::Write;

use crate::{
    ACTION_BYE, ACTION_GET_RESPONSE, ACTION_HELLO, ACTION_PROBE_MATCHES, ACTION_RESOLVE_MATCHES,
    PNPX_NS, PUB_NS, SOAP_NS, TO_ANONYMOUS, TO_DISCOVERY, WSA_NS, WSDP_NS, WSD_NS, WSX_NS,
};

/// What a computer is, in the prefixes [`envelope`] declares.
const TYPES: &str = "wsdp:Device pub:Computer";
/// Bumped when the metadata changes; ours is fixed for a run, and a
/// client fetches it afresh after a new Hello anyway.
const METADATA_VERSION: u32 = 1;

/// `wsd:AppSequence`: lets receivers order a device's messages and
/// notice a restart (WS-Discovery 7).
#[derive(Clone, Copy, Debug)]
pub struct Sequence {
    /// Must grow with every start of the service: a start time will do.
    pub instance_id: u64,
    /// Grows with every message sent within one instance.
    pub message_number: u64,
}

/// What a GetResponse tells about the device and the computer it is.
#[derive(Clone, Copy, Debug)]
pub struct Metadata<'a> {
    /// The endpoint reference, `urn:uuid:...`.
    pub endpoint: &'a str,
    /// `wsdp:FriendlyName`.
    pub friendly_name: &'a str,
    /// `wsdp:Manufacturer` and `wsdp:ModelName`.
    pub manufacturer: &'a str,
    pub model_name: &'a str,
    /// `wsdp:FirmwareVersion`.
    pub firmware_version: &'a str,
    /// The NetBIOS name Explorer lists.
    pub computer_name: &'a str,
    /// The workgroup Explorer files it under.
    pub workgroup: &'a str,
}

/// Hello: announced by multicast on start (WS-Discovery 4.1).
pub fn hello(endpoint: &str, xaddrs: &str, message_id: &str, seq: Sequence) -> String {
    let body = format!(
        "<wsd:Hello>{}</wsd:Hello>",
        endpoint_fields(endpoint, xaddrs)
    );
    envelope(
        TO_DISCOVERY,
        ACTION_HELLO,
        message_id,
        None,
        Some(seq),
        &body,
    )
}

/// Bye: announced by multicast on stop (WS-Discovery 4.2).
pub fn bye(endpoint: &str, message_id: &str, seq: Sequence) -> String {
    let body = format!("<wsd:Bye>{}</wsd:Bye>", endpoint_reference(endpoint));
    envelope(TO_DISCOVERY, ACTION_BYE, message_id, None, Some(seq), &body)
}

/// ProbeMatches: the unicast answer to a matching Probe (WS-Discovery
/// 5.3). It carries the XAddrs already, which saves the client the
/// Resolve round.
pub fn probe_matches(
    endpoint: &str,
    xaddrs: &str,
    message_id: &str,
    relates_to: &str,
    seq: Sequence,
) -> String {
    let action = ACTION_PROBE_MATCHES;
    matches(
        "Probe", action, endpoint, xaddrs, message_id, relates_to, seq,
    )
}

/// ResolveMatches: the unicast answer to a Resolve naming our endpoint
/// (WS-Discovery 6.2).
pub fn resolve_matches(
    endpoint: &str,
    xaddrs: &str,
    message_id: &str,
    relates_to: &str,
    seq: Sequence,
) -> String {
    let action = ACTION_RESOLVE_MATCHES;
    matches(
        "Resolve", action, endpoint, xaddrs, message_id, relates_to, seq,
    )
}

/// `<wsd:{kind}Matches>` with one match, this endpoint, answering the
/// message `relates_to`.
fn matches(
    kind: &str,
    action: &str,
    endpoint: &str,
    xaddrs: &str,
    message_id: &str,
    relates_to: &str,
    seq: Sequence,
) -> String {
    let body = format!(
        "<wsd:{kind}Matches><wsd:{kind}Match>{}</wsd:{kind}Match></wsd:{kind}Matches>",
        endpoint_fields(endpoint, xaddrs)
    );
    envelope(
        TO_ANONYMOUS,
        action,
        message_id,
        Some(relates_to),
        Some(seq),
        &body,
    )
}

/// GetResponse: the device's metadata (DPWS 5), with the host
/// relationship whose `pub:Computer` names the computer and its
/// workgroup the way Explorer shows them: `NAME/Workgroup:WORKGROUP`.
pub fn get_response(meta: &Metadata<'_>, message_id: &str, relates_to: &str) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<wsx:Metadata>\
         <wsx:MetadataSection Dialect=\"{WSDP_NS}/ThisDevice\"><wsdp:ThisDevice>\
         <wsdp:FriendlyName>{}</wsdp:FriendlyName>\
         <wsdp:FirmwareVersion>{}</wsdp:FirmwareVersion>\
         <wsdp:SerialNumber>1</wsdp:SerialNumber>\
         </wsdp:ThisDevice></wsx:MetadataSection>\
         <wsx:MetadataSection Dialect=\"{WSDP_NS}/ThisModel\"><wsdp:ThisModel>\
         <wsdp:Manufacturer>{}</wsdp:Manufacturer>\
         <wsdp:ModelName>{}</wsdp:ModelName>\
         <pnpx:DeviceCategory>Computers</pnpx:DeviceCategory>\
         </wsdp:ThisModel></wsx:MetadataSection>\
         <wsx:MetadataSection Dialect=\"{WSDP_NS}/Relationship\">\
         <wsdp:Relationship Type=\"{WSDP_NS}/host\"><wsdp:Host>{}\
         <wsdp:Types>pub:Computer</wsdp:Types>\
         <wsdp:ServiceId>{}</wsdp:ServiceId>\
         <pub:Computer>{}/Workgroup:{}</pub:Computer>\
         </wsdp:Host></wsdp:Relationship></wsx:MetadataSection>\
         </wsx:Metadata>",
        escape(meta.friendly_name),
        escape(meta.firmware_version),
        escape(meta.manufacturer),
        escape(meta.model_name),
        endpoint_reference(meta.endpoint),
        escape(meta.endpoint),
        escape(meta.computer_name),
        escape(meta.workgroup),
    );
    envelope(
        TO_ANONYMOUS,
        ACTION_GET_RESPONSE,
        message_id,
        Some(relates_to),
        None,
        &body,
    )
}

fn endpoint_reference(endpoint: &str) -> String {
    format!(
        "<wsa:EndpointReference><wsa:Address>{}</wsa:Address></wsa:EndpointReference>",
        escape(endpoint)
    )
}

/// The fields Hello, ProbeMatch and ResolveMatch share.
fn endpoint_fields(endpoint: &str, xaddrs: &str) -> String {
    let mut out = endpoint_reference(endpoint);
    let _ = write!(out, "<wsd:Types>{TYPES}</wsd:Types>");
    let _ = write!(out, "<wsd:XAddrs>{}</wsd:XAddrs>", escape(xaddrs));
    let _ = write!(
        out,
        "<wsd:MetadataVersion>{METADATA_VERSION}</wsd:MetadataVersion>"
    );
    out
}

fn envelope(
    to: &str,
    action: &str,
    message_id: &str,
    relates_to: Option<&str>,
    seq: Option<Sequence>,
    body: &str,
) -> String {
    let mut out = String::with_capacity(1024 + body.len());
    let _ = write!(
        out,
        "<?xml version=\"1.0\" encoding=\"utf-8\"?>\
         <soap:Envelope xmlns:soap=\"{SOAP_NS}\" xmlns:wsa=\"{WSA_NS}\" xmlns:wsd=\"{WSD_NS}\" \
         xmlns:wsx=\"{WSX_NS}\" xmlns:wsdp=\"{WSDP_NS}\" xmlns:pnpx=\"{PNPX_NS}\" \
         xmlns:pub=\"{PUB_NS}\"><soap:Header>\
         <wsa:To>{}</wsa:To><wsa:Action>{}</wsa:Action><wsa:MessageID>{}</wsa:MessageID>",
        escape(to),
        escape(action),
        escape(message_id),
    );
    if let Some(relates_to) = relates_to {
        let _ = write!(out, "<wsa:RelatesTo>{}</wsa:RelatesTo>", escape(relates_to));
    }
    if let Some(seq) = seq {
        let _ = write!(
            out,
            "<wsd:AppSequence InstanceId=\"{}\" MessageNumber=\"{}\"/>",
            seq.instance_id, seq.message_number
        );
    }
    let _ = write!(
        out,
        "</soap:Header><soap:Body>{body}</soap:Body></soap:Envelope>"
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, Request};
    use quick_xml::events::Event;
    use quick_xml::NsReader;

    const SEQ: Sequence = Sequence {
        instance_id: 1700000000,
        message_number: 7,
    };
    const EPR: &str = "urn:uuid:37f86d35-e6ac-4241-964f-1d9ae46fb366";
    const XADDRS: &str = "http://192.168.0.2:5357/37f86d35-e6ac-4241-964f-1d9ae46fb366";

    /// Every element's namespace and local name, and its text, in order:
    /// what a namespace-aware reader sees, whatever the prefixes.
    fn outline(xml: &str) -> Vec<(String, String)> {
        let mut reader = NsReader::from_str(xml);
        let mut out = Vec::new();
        loop {
            let (ns, event) = reader.read_resolved_event().unwrap();
            match event {
                Event::Start(e) | Event::Empty(e) => {
                    let ns = match ns {
                        quick_xml::name::ResolveResult::Bound(ns) => ns.0.to_string(),
                        other => panic!("unbound element {other:?}"),
                    };
                    out.push((ns, e.local_name().into_inner().to_string()));
                }
                Event::Text(t) if !t.xml10_content().trim().is_empty() => {
                    out.push(("#text".into(), t.xml10_content().into_owned()));
                }
                Event::Eof => return out,
                _ => {}
            }
        }
    }

    fn has(outline: &[(String, String)], ns: &str, local: &str, text: &str) -> bool {
        outline
            .windows(2)
            .any(|w| w[0] == (ns.into(), local.into()) && w[1] == ("#text".into(), text.into()))
    }

    #[test]
    fn probe_matches_names_the_endpoint_and_relates_to_the_probe() {
        let xml = probe_matches(EPR, XADDRS, "urn:uuid:m", "urn:uuid:probe", SEQ);
        let o = outline(&xml);
        assert!(has(&o, WSA_NS, "Action", ACTION_PROBE_MATCHES));
        assert!(has(&o, WSA_NS, "RelatesTo", "urn:uuid:probe"));
        assert!(has(&o, WSA_NS, "To", TO_ANONYMOUS));
        assert!(has(&o, WSA_NS, "Address", EPR));
        assert!(has(&o, WSD_NS, "Types", TYPES));
        assert!(has(&o, WSD_NS, "XAddrs", XADDRS));
        assert!(xml.contains("<wsd:AppSequence InstanceId=\"1700000000\" MessageNumber=\"7\"/>"));
        // It reads back as a message like any other.
        let m = parse(xml.as_bytes()).unwrap();
        assert_eq!(m.message_id, "urn:uuid:m");
        assert_eq!(m.request, Request::Other);
    }

    #[test]
    fn hello_bye_resolve() {
        let o = outline(&hello(EPR, XADDRS, "urn:uuid:h", SEQ));
        assert!(has(&o, WSA_NS, "Action", ACTION_HELLO));
        assert!(has(&o, WSA_NS, "To", TO_DISCOVERY));
        assert!(has(&o, WSD_NS, "XAddrs", XADDRS));
        let o = outline(&bye(EPR, "urn:uuid:b", SEQ));
        assert!(has(&o, WSA_NS, "Action", ACTION_BYE));
        assert!(has(&o, WSA_NS, "Address", EPR));
        let o = outline(&resolve_matches(
            EPR,
            XADDRS,
            "urn:uuid:r",
            "urn:uuid:q",
            SEQ,
        ));
        assert!(has(&o, WSA_NS, "Action", ACTION_RESOLVE_MATCHES));
        assert!(has(&o, WSA_NS, "RelatesTo", "urn:uuid:q"));
        assert!(has(&o, WSD_NS, "XAddrs", XADDRS));
    }

    #[test]
    fn get_response_names_the_computer() {
        let meta = Metadata {
            endpoint: EPR,
            friendly_name: "NAS",
            manufacturer: "copyless",
            model_name: "copyless",
            firmware_version: "0.1.0",
            computer_name: "NAS",
            workgroup: "WORKGROUP",
        };
        let o = outline(&get_response(&meta, "urn:uuid:g", "urn:uuid:get"));
        assert!(has(&o, WSA_NS, "Action", ACTION_GET_RESPONSE));
        assert!(has(&o, WSA_NS, "RelatesTo", "urn:uuid:get"));
        assert!(has(&o, PUB_NS, "Computer", "NAS/Workgroup:WORKGROUP"));
        assert!(has(&o, WSDP_NS, "FriendlyName", "NAS"));
        assert!(has(&o, WSDP_NS, "Types", "pub:Computer"));
        assert!(has(&o, PNPX_NS, "DeviceCategory", "Computers"));
    }

    #[test]
    fn values_from_outside_are_escaped() {
        let evil = "x</wsa:RelatesTo><evil/>&";
        let xml = probe_matches(EPR, XADDRS, "urn:uuid:m", evil, SEQ);
        assert!(xml.contains("<wsa:RelatesTo>x&lt;/wsa:RelatesTo&gt;&lt;evil/&gt;&amp;<"));
        assert!(!outline(&xml).iter().any(|(_, local)| local == "evil"));
        // A carriage return comes back as one, not as a line feed.
        let xml = probe_matches(EPR, XADDRS, "a\rb", "urn:uuid:q", SEQ);
        assert_eq!(parse(xml.as_bytes()).unwrap().message_id, "a\rb");
    }
}
