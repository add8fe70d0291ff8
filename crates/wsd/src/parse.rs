//! Reading a received message: a SOAP 1.2 envelope whose WS-Addressing
//! header says what it is, and, for a Probe or a Resolve, the few body
//! elements that decide the answer.
//!
//! Anyone on the network can send these, so the reader is strict about
//! size and lenient about everything it does not need: at most
//! [`MAX_MESSAGE`] bytes, [`MAX_DEPTH`] levels of elements, [`MAX_FIELD`]
//! bytes per value kept and [`MAX_TYPES`] types; unknown headers and
//! extension elements are skipped; no DTD (and so no entity of its own)
//! is accepted. What it returns is owned and small whatever came in.

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesRef, Event};
use quick_xml::name::{QName, ResolveResult};
use quick_xml::NsReader;
use std::fmt;

use crate::{
    ACTION_GET, ACTION_PROBE, ACTION_RESOLVE, MAX_MESSAGE, PUB_NS, SOAP_NS, WSA_NS, WSDP_NS, WSD_NS,
};

/// Elements nested deeper than this make the message malformed; a Probe
/// needs four levels.
pub const MAX_DEPTH: usize = 32;
/// The longest value kept (an action, a message id, an address, the
/// list of types).
pub const MAX_FIELD: usize = 2048;
/// The most types a Probe may ask for.
pub const MAX_TYPES: usize = 16;

/// A received message, as far as a target service cares.
#[derive(Debug, PartialEq, Eq)]
pub struct Message {
    /// `wsa:MessageID`: the reply's `wsa:RelatesTo`, and how repeats of
    /// one message over UDP are recognised.
    pub message_id: String,
    /// `wsa:To`, if given: where the sender addressed it.
    pub to: Option<String>,
    pub request: Request,
}

/// What the message asks.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// Who is there (of these types)?
    Probe(Probe),
    /// Where is the endpoint with this address?
    Resolve { endpoint: String },
    /// WS-Transfer Get: the device's metadata.
    Get,
    /// Anything else (another device's Hello or Bye, matches meant for
    /// a client): nothing for a target service to answer.
    Other,
}

/// A Probe's conditions.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Probe {
    /// The types asked for; none asks for every device.
    pub types: Vec<TypeName>,
    /// Whether it names scopes.
    pub scoped: bool,
}

/// A qualified name from a Probe's `wsd:Types`, its prefix resolved.
#[derive(Debug, PartialEq, Eq)]
pub struct TypeName {
    /// None when the prefix was not declared: such a type matches nothing.
    pub namespace: Option<String>,
    pub local: String,
}

impl Probe {
    /// Whether a computer (`wsdp:Device pub:Computer`) without scopes
    /// matches: each type asked for must be one of its types, and no
    /// scope may be asked for (WS-Discovery 5.1, 5.3).
    pub fn matches_computer(&self) -> bool {
        !self.scoped
            && self.types.iter().all(|t| match t.namespace.as_deref() {
                Some(WSDP_NS) => t.local == "Device",
                Some(PUB_NS) => t.local == "Computer",
                _ => false,
            })
    }
}

/// Why a message was not read; it is dropped either way.
#[derive(Debug, PartialEq, Eq)]
pub enum Error {
    TooLong,
    NotUtf8,
    Xml(String),
    DocType,
    NotSoap,
    TooDeep,
    FieldTooLong,
    TooManyTypes,
    Twice(&'static str),
    Missing(&'static str),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::TooLong => write!(f, "longer than {MAX_MESSAGE} bytes"),
            Error::NotUtf8 => f.write_str("not UTF-8"),
            Error::Xml(e) => write!(f, "not well-formed XML: {e}"),
            Error::DocType => f.write_str("a document type declaration"),
            Error::NotSoap => f.write_str("not a SOAP 1.2 envelope"),
            Error::TooDeep => write!(f, "elements nested deeper than {MAX_DEPTH}"),
            Error::FieldTooLong => write!(f, "a value longer than {MAX_FIELD} bytes"),
            Error::TooManyTypes => write!(f, "more than {MAX_TYPES} types"),
            Error::Twice(what) => write!(f, "{what} given twice"),
            Error::Missing(what) => write!(f, "no {what}"),
        }
    }
}

impl std::error::Error for Error {}

/// The elements that matter, by where they stand; everything else is
/// `Other` and only counted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Elem {
    Envelope,
    Header,
    Body,
    Action,
    MessageId,
    To,
    Probe,
    Types,
    Scopes,
    Resolve,
    EndpointReference,
    Address,
    Other,
}

impl Elem {
    /// What an element named `{ns}local` is, inside `parent`.
    fn of(parent: Option<Elem>, ns: Option<&str>, local: &str) -> Result<Elem, Error> {
        use Elem::*;
        Ok(match (parent, ns, local) {
            (None, Some(SOAP_NS), "Envelope") => Envelope,
            (None, _, _) => return Err(Error::NotSoap),
            (Some(Envelope), Some(SOAP_NS), "Header") => Header,
            (Some(Envelope), Some(SOAP_NS), "Body") => Body,
            (Some(Header), Some(WSA_NS), "Action") => Action,
            (Some(Header), Some(WSA_NS), "MessageID") => MessageId,
            (Some(Header), Some(WSA_NS), "To") => To,
            (Some(Body), Some(WSD_NS), "Probe") => Probe,
            (Some(Body), Some(WSD_NS), "Resolve") => Resolve,
            (Some(Probe), Some(WSD_NS), "Types") => Types,
            (Some(Probe), Some(WSD_NS), "Scopes") => Scopes,
            (Some(Resolve), Some(WSA_NS), "EndpointReference") => EndpointReference,
            (Some(EndpointReference), Some(WSA_NS), "Address") => Address,
            _ => Other,
        })
    }

    /// Elements whose text is kept, and the name an error gives them.
    fn field(self) -> Option<&'static str> {
        match self {
            Elem::Action => Some("wsa:Action"),
            Elem::MessageId => Some("wsa:MessageID"),
            Elem::To => Some("wsa:To"),
            Elem::Types => Some("wsd:Types"),
            Elem::Scopes => Some("wsd:Scopes"),
            Elem::Address => Some("wsa:Address"),
            _ => None,
        }
    }
}

/// What has been read so far.
#[derive(Default)]
struct Found {
    action: Option<String>,
    message_id: Option<String>,
    to: Option<String>,
    scopes: Option<String>,
    address: Option<String>,
    types: Option<Vec<TypeName>>,
    probe: bool,
    resolve: bool,
}

/// Reads one received message.
pub fn parse(data: &[u8]) -> Result<Message, Error> {
    if data.len() > MAX_MESSAGE {
        return Err(Error::TooLong);
    }
    let text = std::str::from_utf8(data).map_err(|_| Error::NotUtf8)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut reader = NsReader::from_str(text);
    let mut stack: Vec<Elem> = Vec::new();
    // The text of the field being read, while one is open.
    let mut value = String::new();
    let mut found = Found::default();
    let mut seen_root = false;
    loop {
        let (ns, event) = reader.read_resolved_event().map_err(xml_error)?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                if stack.is_empty() && seen_root {
                    return Err(Error::Xml("a second root element".into()));
                }
                if stack.len() >= MAX_DEPTH {
                    return Err(Error::TooDeep);
                }
                let elem = Elem::of(
                    stack.last().copied(),
                    namespace(&ns),
                    e.local_name().into_inner(),
                )?;
                seen_root = true;
                open(elem, &mut found)?;
                value.clear();
                if matches!(event, Event::Start(_)) {
                    stack.push(elem);
                } else {
                    close(elem, &mut value, &mut found, &reader)?;
                }
            }
            Event::End(_) => {
                if let Some(elem) = stack.pop() {
                    close(elem, &mut value, &mut found, &reader)?;
                }
            }
            Event::Text(e) => keep(&stack, &mut value, &e.xml10_content())?,
            Event::CData(e) => keep(&stack, &mut value, &e.xml10_content())?,
            Event::GeneralRef(r) => keep(&stack, &mut value, &reference(&r)?)?,
            Event::DocType(_) => return Err(Error::DocType),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if !seen_root {
        return Err(Error::NotSoap);
    }
    let action = found.action.ok_or(Error::Missing("wsa:Action"))?;
    let message_id = found.message_id.ok_or(Error::Missing("wsa:MessageID"))?;
    let request = match action.as_str() {
        ACTION_PROBE if found.probe => Request::Probe(Probe {
            types: found.types.unwrap_or_default(),
            scoped: found.scopes.is_some_and(|s| !s.is_empty()),
        }),
        ACTION_PROBE => return Err(Error::Missing("wsd:Probe")),
        ACTION_RESOLVE if found.resolve => Request::Resolve {
            endpoint: found.address.ok_or(Error::Missing("wsa:Address"))?,
        },
        ACTION_RESOLVE => return Err(Error::Missing("wsd:Resolve")),
        ACTION_GET => Request::Get,
        _ => Request::Other,
    };
    Ok(Message {
        message_id,
        to: found.to,
        request,
    })
}

fn xml_error(e: quick_xml::Error) -> Error {
    Error::Xml(e.to_string())
}

fn namespace<'a>(ns: &'a ResolveResult<'_>) -> Option<&'a str> {
    match ns {
        ResolveResult::Bound(ns) => Some(ns.0),
        _ => None,
    }
}

/// A field may appear once: two Actions, say, would leave it unclear
/// which one the sender meant.
fn open(elem: Elem, found: &mut Found) -> Result<(), Error> {
    let taken = match elem {
        Elem::Action => found.action.is_some(),
        Elem::MessageId => found.message_id.is_some(),
        Elem::To => found.to.is_some(),
        Elem::Types => found.types.is_some(),
        Elem::Scopes => found.scopes.is_some(),
        Elem::Address => found.address.is_some(),
        Elem::Probe => std::mem::replace(&mut found.probe, true),
        Elem::Resolve => std::mem::replace(&mut found.resolve, true),
        _ => false,
    };
    match (taken, elem.field()) {
        (true, Some(name)) => Err(Error::Twice(name)),
        (true, None) => Err(Error::Twice(if elem == Elem::Probe {
            "wsd:Probe"
        } else {
            "wsd:Resolve"
        })),
        (false, _) => Ok(()),
    }
}

/// Adds text to the open field's value, if the innermost element is one.
fn keep(stack: &[Elem], value: &mut String, text: &str) -> Result<(), Error> {
    if stack.last().and_then(|e| e.field()).is_none() {
        return Ok(());
    }
    if value.len() + text.len() > MAX_FIELD {
        return Err(Error::FieldTooLong);
    }
    value.push_str(text);
    Ok(())
}

/// The text of a character or predefined entity reference; any other
/// entity would need a DTD, which is refused.
fn reference(r: &BytesRef<'_>) -> Result<String, Error> {
    if let Some(c) = r.resolve_char_ref().map_err(xml_error)? {
        return Ok(c.to_string());
    }
    let name = r.clone().into_inner();
    resolve_predefined_entity(&name)
        .map(str::to_string)
        .ok_or_else(|| Error::Xml(format!("unknown entity &{name};")))
}

/// Ends an element: a field takes its value (URIs and lists of names
/// are compared without surrounding white space, which Windows puts
/// there).
fn close(
    elem: Elem,
    value: &mut String,
    found: &mut Found,
    reader: &NsReader<&[u8]>,
) -> Result<(), Error> {
    let text = || value.trim().to_string();
    match elem {
        Elem::Action => found.action = Some(text()),
        Elem::MessageId => found.message_id = Some(text()),
        Elem::To => found.to = Some(text()),
        Elem::Scopes => found.scopes = Some(text()),
        Elem::Address => found.address = Some(text()),
        Elem::Types => {
            // Prefixes are resolved here, while the element's own
            // declarations are still in scope.
            let mut types = Vec::new();
            for name in value.split_ascii_whitespace() {
                if types.len() == MAX_TYPES {
                    return Err(Error::TooManyTypes);
                }
                let (ns, local) = reader.resolver().resolve(QName(name), true);
                types.push(TypeName {
                    namespace: namespace(&ns).map(str::to_string),
                    local: local.into_inner().to_string(),
                });
            }
            found.types = Some(types);
        }
        _ => {}
    }
    value.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROBE: &str = r#"<?xml version="1.0" encoding="utf-8" ?>
<soap:Envelope
    xmlns:soap="http://www.w3.org/2003/05/soap-envelope"
    xmlns:wsa="http://schemas.xmlsoap.org/ws/2004/08/addressing"
    xmlns:wsd="http://schemas.xmlsoap.org/ws/2005/04/discovery"
    xmlns:wsdp="http://schemas.xmlsoap.org/ws/2006/02/devprof">
<soap:Header>
    <wsa:To>
        urn:schemas-xmlsoap-org:ws:2005:04:discovery
    </wsa:To>
    <wsa:Action>
        http://schemas.xmlsoap.org/ws/2005/04/discovery/Probe
    </wsa:Action>
    <wsa:MessageID>
        urn:uuid:29cf10da-5c41-4d55-b184-5ee15e38ce23
    </wsa:MessageID>
</soap:Header>
<soap:Body>
    <wsd:Probe>
        <wsd:Types>wsdp:Device</wsd:Types>
    </wsd:Probe>
</soap:Body>
</soap:Envelope>"#;

    fn envelope(header: &str, body: &str) -> String {
        format!(
            r#"<s:Envelope xmlns:s="{SOAP_NS}" xmlns:a="{WSA_NS}" xmlns:d="{WSD_NS}">
<s:Header>{header}</s:Header><s:Body>{body}</s:Body></s:Envelope>"#
        )
    }

    fn probe(types: &str) -> Result<Message, Error> {
        let header = format!("<a:Action>{ACTION_PROBE}</a:Action><a:MessageID>m1</a:MessageID>");
        parse(envelope(&header, &format!("<d:Probe>{types}</d:Probe>")).as_bytes())
    }

    fn matches(types: &str) -> bool {
        match probe(types).unwrap().request {
            Request::Probe(p) => p.matches_computer(),
            other => panic!("not a probe: {other:?}"),
        }
    }

    #[test]
    fn windows_probe() {
        let m = parse(PROBE.as_bytes()).unwrap();
        assert_eq!(
            m.message_id,
            "urn:uuid:29cf10da-5c41-4d55-b184-5ee15e38ce23"
        );
        assert_eq!(
            m.to.as_deref(),
            Some("urn:schemas-xmlsoap-org:ws:2005:04:discovery")
        );
        let Request::Probe(p) = m.request else {
            panic!("not a probe")
        };
        assert_eq!(
            p.types,
            vec![TypeName {
                namespace: Some(WSDP_NS.into()),
                local: "Device".into()
            }]
        );
        assert!(p.matches_computer());
    }

    #[test]
    fn probe_matching() {
        // No types: every device.
        assert!(matches(""));
        assert!(matches("<d:Types/>"));
        assert!(matches(&format!(
            r#"<d:Types xmlns:x="{WSDP_NS}" xmlns:p="{PUB_NS}"> x:Device
               p:Computer </d:Types>"#
        )));
        // The prefix is what it is bound to, not its spelling.
        assert!(!matches(&format!(
            r#"<d:Types xmlns:wsdp="{PUB_NS}">wsdp:Device</d:Types>"#
        )));
        // An unbound prefix, another type, a scope: no match.
        assert!(!matches("<d:Types>wsdp:Device</d:Types>"));
        assert!(!matches(
            r#"<d:Types xmlns:p="http://example.org/printer">p:Printer</d:Types>"#
        ));
        assert!(!matches(
            "<d:Scopes>ldap:///ou=engineering,o=examplecom,c=us</d:Scopes>"
        ));
        assert!(matches("<d:Scopes> </d:Scopes>"));
        // An unprefixed type takes the default namespace.
        assert!(matches(&format!(
            r#"<d:Types xmlns="{WSDP_NS}">Device</d:Types>"#
        )));
    }

    #[test]
    fn resolve_and_get() {
        let header = format!("<a:Action>{ACTION_RESOLVE}</a:Action><a:MessageID>m2</a:MessageID>");
        let body = "<d:Resolve><a:EndpointReference><a:Address> urn:uuid:1 </a:Address>\
                    </a:EndpointReference></d:Resolve>";
        let m = parse(envelope(&header, body).as_bytes()).unwrap();
        assert_eq!(
            m.request,
            Request::Resolve {
                endpoint: "urn:uuid:1".into()
            }
        );
        let header = format!(
            "<a:To>urn:uuid:1</a:To><a:Action>{ACTION_GET}</a:Action>\
             <a:MessageID>m3</a:MessageID><a:ReplyTo><a:Address>x</a:Address></a:ReplyTo>"
        );
        let m = parse(envelope(&header, "").as_bytes()).unwrap();
        assert_eq!(m.request, Request::Get);
        assert_eq!(m.to.as_deref(), Some("urn:uuid:1"));
        assert_eq!(m.message_id, "m3");
    }

    #[test]
    fn others_and_escapes() {
        let header = "<a:Action>http://schemas.xmlsoap.org/ws/2005/04/discovery/Hello</a:Action>\
             <a:MessageID>a&amp;b&#x41;<![CDATA[<c>]]></a:MessageID>";
        let m = parse(envelope(header, "<d:Hello/>").as_bytes()).unwrap();
        assert_eq!(m.request, Request::Other);
        assert_eq!(m.message_id, "a&bA<c>");
        // Line ends read as \n, in CDATA too; a character reference
        // keeps a carriage return.
        let header = "<a:Action>x</a:Action>\
             <a:MessageID>a\r\nb<![CDATA[c\rd]]>e&#13;f</a:MessageID>";
        let m = parse(envelope(header, "").as_bytes()).unwrap();
        assert_eq!(m.message_id, "a\nbc\nde\rf");
    }

    #[test]
    fn malformed() {
        let id = "<a:MessageID>m</a:MessageID>";
        let action = format!("<a:Action>{ACTION_PROBE}</a:Action>");
        let cases: Vec<(Vec<u8>, Error)> = vec![
            (vec![b'<'; MAX_MESSAGE + 1], Error::TooLong),
            (b"\xff\xfe<".to_vec(), Error::NotUtf8),
            (b"".to_vec(), Error::NotSoap),
            (b"<Envelope/>".to_vec(), Error::NotSoap),
            (
                envelope(id, "<d:Probe/>").into_bytes(),
                Error::Missing("wsa:Action"),
            ),
            (
                envelope(&action, "<d:Probe/>").into_bytes(),
                Error::Missing("wsa:MessageID"),
            ),
            (
                envelope(&format!("{action}{id}"), "").into_bytes(),
                Error::Missing("wsd:Probe"),
            ),
            (
                envelope(&format!("{action}{action}{id}"), "<d:Probe/>").into_bytes(),
                Error::Twice("wsa:Action"),
            ),
            (
                envelope(&format!("{action}{id}"), "<d:Probe/><d:Probe/>").into_bytes(),
                Error::Twice("wsd:Probe"),
            ),
            (
                envelope(
                    &format!("<a:Action>{}</a:Action>{id}", "x".repeat(MAX_FIELD + 1)),
                    "",
                )
                .into_bytes(),
                Error::FieldTooLong,
            ),
            (
                envelope(
                    &format!("{action}{id}"),
                    &format!("<d:Probe><d:Types>{}</d:Types></d:Probe>", "a ".repeat(17)),
                )
                .into_bytes(),
                Error::TooManyTypes,
            ),
            (
                envelope(&format!("{action}{id}"), &"<x>".repeat(40)).into_bytes(),
                Error::TooDeep,
            ),
            (
                format!("<!DOCTYPE x [<!ENTITY e \"e\">]>{}", envelope(id, ""),).into_bytes(),
                Error::DocType,
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                parse(&input),
                Err(want),
                "{}",
                String::from_utf8_lossy(&input)
            );
        }
        // Broken XML of every kind is an error, never a panic.
        let good = PROBE.as_bytes();
        for cut in 0..good.len() {
            let _ = parse(&good[..cut]);
        }
        assert!(matches!(
            parse(envelope(id, "&bogus;").as_bytes()),
            Err(Error::Xml(_))
        ));
        assert!(matches!(
            parse(format!("{}<x/>", envelope(&format!("{action}{id}"), "<d:Probe/>")).as_bytes()),
            Err(Error::Xml(_))
        ));
    }
}
