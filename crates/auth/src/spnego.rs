//! SPNEGO tokens (RFC 4178, MS-SPNG): the client's NegTokenInit (inside the
//! GSS-API InitialContextToken), NegTokenResp both ways, and the server's
//! NegTokenInit2 hint.

use crate::acceptor::AuthError;
use crate::der::{self, context, Tlv};
use crate::kerberos::{OID_KRB5, OID_MS_KRB5};

/// 1.3.6.1.5.5.2, the SPNEGO mechanism.
pub(crate) const OID_SPNEGO: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
/// 1.3.6.1.4.1.311.2.2.10, NTLMSSP.
pub(crate) const OID_NTLMSSP: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];

/// The hint Windows puts in its NEGOTIATE response (MS-SPNG 3.2.5.2).
const NEG_HINT_NAME: &[u8] = b"not_defined_in_RFC4178@please_ignore";

/// NegTokenResp's negState.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NegState {
    AcceptCompleted = 0,
    AcceptIncomplete = 1,
    RequestMic = 3,
}

/// A client's NegTokenInit, borrowed from the token.
#[derive(Debug)]
pub(crate) struct NegTokenInit<'a> {
    /// The DER of the MechTypeList as the client sent it: mechListMIC covers
    /// these exact bytes.
    pub mech_types_der: &'a [u8],
    /// The OIDs' contents, in the client's order of preference.
    pub mech_types: Vec<&'a [u8]>,
    pub mech_token: Option<&'a [u8]>,
}

/// A NegTokenResp, borrowed from the token.
#[derive(Debug, Default)]
pub(crate) struct NegTokenResp<'a> {
    pub response_token: Option<&'a [u8]>,
    pub mech_list_mic: Option<&'a [u8]>,
}

/// Whether `token` looks like a NegTokenInit, wrapped or not.
pub(crate) fn is_init(token: &[u8]) -> bool {
    matches!(token.first(), Some(&der::APPLICATION_0) | Some(&0xa0))
}

/// Whether `token` looks like a NegTokenResp.
pub(crate) fn is_resp(token: &[u8]) -> bool {
    token.first() == Some(&context(1))
}

/// Parses a NegTokenInit, either inside the InitialContextToken (0x60, as
/// SMB clients send it) or bare ([0]).
pub(crate) fn parse_init(token: &[u8]) -> Result<NegTokenInit<'_>, AuthError> {
    let (outer, _trailing) = der::read(token)?;
    let negotiation_token = match outer.tag {
        der::APPLICATION_0 => {
            let (oid, rest) = der::read_tagged(outer.value, der::OID)?;
            if oid.value != OID_SPNEGO {
                // A bare Kerberos or NTLM GSS token: not ours to negotiate.
                return Err(AuthError::Unsupported);
            }
            rest
        }
        tag if tag == context(0) => outer.raw,
        _ => return Err(AuthError::Malformed),
    };
    let init_seq = der::only(negotiation_token, context(0))?;
    let fields = der::elements(der::only(init_seq, der::SEQUENCE)?)?;

    let mut mech_types_der = None;
    let mut mech_token = None;
    for Tlv { tag, value, .. } in fields {
        match tag {
            t if t == context(0) => {
                let (list, rest) = der::read_tagged(value, der::SEQUENCE)?;
                if !rest.is_empty() {
                    return Err(AuthError::Malformed);
                }
                mech_types_der = Some(list);
            }
            t if t == context(2) => mech_token = Some(der::only(value, der::OCTET_STRING)?),
            // reqFlags and the client's mechListMIC (meaningless before a
            // mechanism is chosen) are ignored, as are unknown fields.
            _ => {}
        }
    }
    let list = mech_types_der.ok_or(AuthError::Malformed)?;
    let mech_types = der::elements(list.value)?
        .into_iter()
        .map(|oid| {
            if oid.tag == der::OID {
                Ok(oid.value)
            } else {
                Err(AuthError::Malformed)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(NegTokenInit {
        mech_types_der: list.raw,
        mech_types,
        mech_token,
    })
}

/// Parses a NegTokenResp ([1]).
pub(crate) fn parse_resp(token: &[u8]) -> Result<NegTokenResp<'_>, AuthError> {
    let (outer, _trailing) = der::read_tagged(token, context(1))?;
    let fields = der::elements(der::only(outer.value, der::SEQUENCE)?)?;
    let mut resp = NegTokenResp::default();
    for Tlv { tag, value, .. } in fields {
        match tag {
            t if t == context(0) => {
                // negState: checked for form only; the client's view of the
                // state does not change what the server does next.
                der::only(value, der::ENUMERATED)?;
            }
            t if t == context(1) => {
                der::only(value, der::OID)?;
            }
            t if t == context(2) => {
                resp.response_token = Some(der::only(value, der::OCTET_STRING)?);
            }
            t if t == context(3) => {
                resp.mech_list_mic = Some(der::only(value, der::OCTET_STRING)?);
            }
            _ => {}
        }
    }
    Ok(resp)
}

/// Builds a NegTokenResp. `supported_mech` is the OID of the chosen
/// mechanism, which the first reply must name.
pub(crate) fn build_resp(
    state: NegState,
    supported_mech: Option<&[u8]>,
    response_token: Option<&[u8]>,
    mech_list_mic: Option<&[u8]>,
) -> Vec<u8> {
    let mut fields = Vec::new();
    der::write(
        &mut fields,
        context(0),
        &der::tlv(der::ENUMERATED, &[state as u8]),
    );
    if let Some(oid) = supported_mech {
        der::write(&mut fields, context(1), &der::tlv(der::OID, oid));
    }
    if let Some(token) = response_token {
        der::write(&mut fields, context(2), &der::tlv(der::OCTET_STRING, token));
    }
    if let Some(mic) = mech_list_mic {
        der::write(&mut fields, context(3), &der::tlv(der::OCTET_STRING, mic));
    }
    der::tlv(context(1), &der::tlv(der::SEQUENCE, &fields))
}

/// The server's NegTokenInit2 (MS-SPNG 2.2.1) offering NTLMSSP, after
/// Kerberos (both its OIDs, Microsoft's first, as Windows lists them) when
/// `kerberos`, with Windows' negHints, wrapped in an InitialContextToken.
pub(crate) fn build_hint(kerberos: bool) -> Vec<u8> {
    let mut list = Vec::new();
    if kerberos {
        der::write(&mut list, der::OID, OID_MS_KRB5);
        der::write(&mut list, der::OID, OID_KRB5);
    }
    der::write(&mut list, der::OID, OID_NTLMSSP);
    let mech_types = der::tlv(der::SEQUENCE, &list);
    let hint_name = der::tlv(context(0), &der::tlv(der::GENERAL_STRING, NEG_HINT_NAME));
    let mut fields = der::tlv(context(0), &mech_types);
    der::write(
        &mut fields,
        context(3),
        &der::tlv(der::SEQUENCE, &hint_name),
    );
    let init = der::tlv(context(0), &der::tlv(der::SEQUENCE, &fields));
    let mut inner = der::tlv(der::OID, OID_SPNEGO);
    inner.extend_from_slice(&init);
    der::tlv(der::APPLICATION_0, &inner)
}

/// Wraps an initial NTLM token the way SMB clients send it: the
/// InitialContextToken around a NegTokenInit offering the given mechanisms.
pub(crate) fn build_init(mechs: &[&[u8]], mech_token: Option<&[u8]>) -> Vec<u8> {
    let mut list = Vec::new();
    for mech in mechs {
        der::write(&mut list, der::OID, mech);
    }
    let mut fields = der::tlv(context(0), &der::tlv(der::SEQUENCE, &list));
    if let Some(token) = mech_token {
        der::write(&mut fields, context(2), &der::tlv(der::OCTET_STRING, token));
    }
    let init = der::tlv(context(0), &der::tlv(der::SEQUENCE, &fields));
    let mut inner = der::tlv(der::OID, OID_SPNEGO);
    inner.extend_from_slice(&init);
    der::tlv(der::APPLICATION_0, &inner)
}

/// The negState of a NegTokenResp, if it has one.
pub(crate) fn resp_state(token: &[u8]) -> Option<u8> {
    let (outer, _) = der::read_tagged(token, context(1)).ok()?;
    let fields = der::elements(der::only(outer.value, der::SEQUENCE).ok()?).ok()?;
    let state = fields.iter().find(|f| f.tag == context(0))?;
    der::only(state.value, der::ENUMERATED)
        .ok()?
        .first()
        .copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KRB5: &[u8] = OID_KRB5;

    #[test]
    fn hint_is_a_negtokeninit_offering_ntlm() {
        let hint = build_hint(false);
        // The InitialContextToken header, the SPNEGO OID and [0] of a
        // 0x3e-byte NegTokenInit2: NTLMSSP alone plus the 36-byte hint.
        assert_eq!(
            hint[..12],
            [0x60, 0x48, 0x06, 0x06, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x02, 0xa0, 0x3e]
        );
        let init = parse_init(&hint).unwrap();
        assert_eq!(init.mech_types, vec![OID_NTLMSSP]);
        assert_eq!(init.mech_token, None);
        assert!(hint
            .windows(NEG_HINT_NAME.len())
            .any(|w| w == NEG_HINT_NAME));
    }

    #[test]
    fn hint_with_kerberos_lists_both_its_oids_first() {
        let hint = build_hint(true);
        let init = parse_init(&hint).unwrap();
        assert_eq!(init.mech_types, vec![OID_MS_KRB5, OID_KRB5, OID_NTLMSSP]);
    }

    #[test]
    fn init_round_trip() {
        let token = build_init(&[KRB5, OID_NTLMSSP], Some(b"NTLMSSP\0abc"));
        let init = parse_init(&token).unwrap();
        assert_eq!(init.mech_types, vec![KRB5, OID_NTLMSSP]);
        assert_eq!(init.mech_token, Some(&b"NTLMSSP\0abc"[..]));
        assert_eq!(init.mech_types_der[0], der::SEQUENCE);
        assert_eq!(
            init.mech_types_der.len(),
            2 + 2 + KRB5.len() + 2 + OID_NTLMSSP.len()
        );
        // Bare [0] NegTokenInit without the GSS wrapper.
        let bare = &token[10..];
        assert_eq!(
            parse_init(bare).unwrap().mech_types,
            vec![KRB5, OID_NTLMSSP]
        );
    }

    #[test]
    fn init_with_other_gss_mechanism_is_unsupported() {
        let mut inner = der::tlv(der::OID, KRB5);
        inner.extend_from_slice(&[0x01, 0x00]);
        let token = der::tlv(der::APPLICATION_0, &inner);
        assert_eq!(parse_init(&token).unwrap_err(), AuthError::Unsupported);
    }

    #[test]
    fn resp_round_trip() {
        let token = build_resp(
            NegState::AcceptIncomplete,
            Some(OID_NTLMSSP),
            Some(b"tok"),
            Some(b"mic"),
        );
        assert_eq!(resp_state(&token), Some(1));
        let resp = parse_resp(&token).unwrap();
        assert_eq!(resp.response_token, Some(&b"tok"[..]));
        assert_eq!(resp.mech_list_mic, Some(&b"mic"[..]));

        let done = build_resp(NegState::AcceptCompleted, None, None, None);
        assert_eq!(done, [0xa1, 0x07, 0x30, 0x05, 0xa0, 0x03, 0x0a, 0x01, 0x00]);
        let resp = parse_resp(&done).unwrap();
        assert_eq!(resp.response_token, None);
        assert_eq!(resp.mech_list_mic, None);
    }
}
