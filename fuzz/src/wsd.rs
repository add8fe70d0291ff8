//! The wsd target: a datagram (or HTTP body) to the WS-Discovery
//! responder, read by `copyless_wsd::parse`. Beyond "no panic": what it
//! returns keeps to its limits, and the replies built from it (which
//! echo its message id) are well-formed messages that carry the same id.

use copyless_wsd::{parse, Request, Sequence, MAX_FIELD, MAX_TYPES};

const EPR: &str = "urn:uuid:37f86d35-e6ac-4241-964f-1d9ae46fb366";
const XADDRS: &str = "http://192.0.2.1:5357/37f86d35-e6ac-4241-964f-1d9ae46fb366";
const SEQ: Sequence = Sequence {
    instance_id: 1,
    message_number: 1,
};

pub fn run(data: &[u8]) {
    let Ok(message) = parse(data) else {
        return;
    };
    assert!(message.message_id.len() <= MAX_FIELD);
    match &message.request {
        Request::Probe(probe) => assert!(probe.types.len() <= MAX_TYPES),
        Request::Resolve { endpoint } => assert!(endpoint.len() <= MAX_FIELD),
        Request::Get | Request::Other => {}
    }
    // Echoed into a reply, the id must neither break it nor add to it,
    // and must come back as it was (a carriage return included: the
    // writer escapes it, so no reader turns it into a line feed).
    let id = &message.message_id;
    let reply = copyless_wsd::probe_matches(EPR, XADDRS, id, "urn:uuid:x", SEQ);
    let again = parse(reply.as_bytes()).expect("a reply we built reads back");
    assert_eq!(again.request, Request::Other);
    assert_eq!(&again.message_id, id);
}
