//! The service side of a Kerberos 5 login (RFC 4120's AP exchange inside
//! RFC 4121's GSS framing): the client's AP-REQ is checked with the
//! service's key from its keytab, and the AP-REP that proves the server
//! to the client is made. Sans-IO: the caller gives the time.
//!
//! [`KerberosService`] adds what a server needs around the exchange: the
//! realm whose users may log on, and a cache of the authenticators seen,
//! so that an AP-REQ captured off the wire cannot be played again.

use picky_asn1::wrapper::{
    ExplicitContextTag0, ExplicitContextTag1, ExplicitContextTag2, ExplicitContextTag3,
    IntegerAsn1, OctetStringAsn1, Optional,
};
use picky_asn1_der::application_tag::ApplicationTag;
use picky_krb::crypto::CipherSuite;
use picky_krb::data_types::{
    Authenticator, EncApRepPartInner, EncTicketPart, EncryptedData, KerberosTime, PrincipalName,
};
use picky_krb::messages::{ApRep, ApRepInner, ApReq};
use std::collections::HashMap;
use std::sync::Mutex;
use zeroize::Zeroizing;

use crate::der::{self, APPLICATION_0, OID};
use crate::keytab::KeytabEntry;

/// 1.2.840.113554.1.2.2, Kerberos 5 in GSS-API.
pub const OID_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// 1.2.840.48018.1.2.2, the same as Microsoft first numbered it; clients
/// offer both in SPNEGO.
pub const OID_MS_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x82, 0xf7, 0x12, 0x01, 0x02, 0x02];

const TOK_AP_REQ: [u8; 2] = [0x01, 0x00];
const TOK_AP_REP: [u8; 2] = [0x02, 0x00];
/// Key usages (RFC 4120 7.5.1).
const USAGE_TICKET: i32 = 2;
const USAGE_AUTHENTICATOR: i32 = 11;
const USAGE_AP_REP: i32 = 12;
const AES128: i32 = 17;
const AES256: i32 = 18;
/// ap-options bit 2, MUTUAL-REQUIRED.
const MUTUAL_REQUIRED: u8 = 0x20;
/// The authenticator checksum type of GSS-API (RFC 4121 4.1.1).
const CKSUM_GSS: u64 = 0x8003;
/// GSS_C_DCE_STYLE: a three-leg exchange SMB clients do not use.
const GSS_DCE_STYLE: u32 = 0x1000;
/// How many authenticators the replay cache holds at most: logons past it,
/// within one skew of each other, are refused rather than remembered.
const MAX_REMEMBERED: usize = 1 << 16;

/// A client the service's key vouched for.
pub struct Accepted {
    /// The client principal's name, without its realm (`alice`).
    pub client: String,
    pub realm: String,
    /// The GSS context key: the client's subkey when it sent one, else
    /// the ticket's session key. SMB's session key is its first 16 bytes.
    pub session_key: Zeroizing<Vec<u8>>,
    /// When the ticket ends, in seconds since 1970; the session expires
    /// then.
    pub end_time: u64,
    /// The GSS token for the client: the AP-REP when it asked for mutual
    /// authentication, else empty.
    pub reply: Vec<u8>,
    /// The authenticator's time, which with the client names it for the
    /// replay cache.
    ctime: u64,
    cusec: u64,
}

#[derive(Debug, PartialEq, Eq)]
pub enum KrbError {
    /// Not a Kerberos AP-REQ.
    Malformed,
    /// No key in the keytab for the ticket's service, realm and type.
    NoKey,
    /// The ticket or authenticator does not decrypt: not for this key.
    Integrity,
    /// The ticket has ended, or is not valid yet.
    TicketTime,
    /// The authenticator is too far from the server's clock.
    Skew,
    /// The authenticator names another client than the ticket.
    WrongClient,
    /// The client is of another realm than the service's users, or is a
    /// service (`host/name`) rather than a user.
    NotAUser,
    /// This authenticator was accepted before: a replay.
    Replay,
}

/// The service side of Kerberos for one server: its keys, its users'
/// realm, the clock skew it allows, and the authenticators it has seen.
pub struct KerberosService {
    keytab: Vec<KeytabEntry>,
    realm: String,
    skew: u64,
    /// (client, ctime, cusec) → the time after which the authenticator
    /// would be refused anyway, so it can be forgotten.
    seen: Mutex<HashMap<(String, u64, u64), u64>>,
}

impl std::fmt::Debug for KerberosService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys stay out of logs.
        f.debug_struct("KerberosService")
            .field("realm", &self.realm)
            .field("keys", &self.keytab.len())
            .field("skew", &self.skew)
            .finish_non_exhaustive()
    }
}

impl KerberosService {
    /// `realm`: the realm whose principals log on as the copyless users of
    /// the same name. `skew`: seconds allowed between the server's clock
    /// and the client's.
    pub fn new(keytab: Vec<KeytabEntry>, realm: String, skew: u64) -> KerberosService {
        KerberosService {
            keytab,
            realm,
            skew,
            seen: Mutex::new(HashMap::new()),
        }
    }

    pub fn realm(&self) -> &str {
        &self.realm
    }

    /// [`accept`] with this service's keys, then the checks that need
    /// its state: the client is a user of its realm, and the
    /// authenticator is new.
    pub fn accept(&self, token: &[u8], now: u64) -> Result<Accepted, KrbError> {
        let accepted = accept(token, &self.keytab, now, self.skew)?;
        if !accepted.realm.eq_ignore_ascii_case(&self.realm) || accepted.client.contains('/') {
            return Err(KrbError::NotAUser);
        }
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.retain(|_, &mut until| until >= now);
        let id = (accepted.client.clone(), accepted.ctime, accepted.cusec);
        if seen.contains_key(&id) || seen.len() >= MAX_REMEMBERED {
            return Err(KrbError::Replay);
        }
        seen.insert(id, accepted.ctime + self.skew);
        Ok(accepted)
    }
}

/// Checks a GSS InitialContextToken holding an AP-REQ, at `now` (seconds
/// since 1970), allowing `skew` seconds between the clocks.
pub fn accept(
    token: &[u8],
    keytab: &[KeytabEntry],
    now: u64,
    skew: u64,
) -> Result<Accepted, KrbError> {
    let inner = der::only(token, APPLICATION_0).map_err(|_| KrbError::Malformed)?;
    let (oid, rest) = der::read_tagged(inner, OID).map_err(|_| KrbError::Malformed)?;
    if oid.value != OID_KRB5 || rest.get(..2) != Some(&TOK_AP_REQ) {
        return Err(KrbError::Malformed);
    }
    let ap_req: ApReq = parse(&rest[2..])?;
    let ticket = &ap_req.0.ticket.0 .0;
    let service = name(&ticket.sname.0);
    let realm = ticket.realm.0.to_string();
    let etype = int(&ticket.enc_part.0.etype.0);
    let kvno = ticket.enc_part.0.kvno.0.as_ref().map(|k| uint(&k.0));
    // The key the ticket names by version; a keytab may hold several as
    // the service's password changes.
    let entry = keytab
        .iter()
        .filter(|e| {
            e.enctype == etype
                && e.principal.eq_ignore_ascii_case(&service)
                && e.realm.eq_ignore_ascii_case(&realm)
        })
        .find(|e| kvno.is_none_or(|v| u64::from(e.kvno) == v))
        .ok_or(KrbError::NoKey)?;
    let plain = decrypt(
        etype,
        &entry.key,
        USAGE_TICKET,
        &ticket.enc_part.0.cipher.0 .0,
    )?;
    let part: EncTicketPart = parse(&plain)?;
    let part = part.0;
    let start = part
        .starttime
        .0
        .as_ref()
        .map_or(&part.auth_time.0, |t| &t.0);
    let end_time = seconds(&part.endtime.0).ok_or(KrbError::Malformed)?;
    let start = seconds(start).ok_or(KrbError::Malformed)?;
    if now + skew < start || now > end_time + skew {
        return Err(KrbError::TicketTime);
    }

    let ticket_key = &part.key.0;
    let key_type = int(&ticket_key.key_type.0);
    let key = Zeroizing::new(ticket_key.key_value.0 .0.clone());
    let auth_cipher = &ap_req.0.authenticator.0.cipher.0 .0;
    let plain = decrypt(key_type, &key, USAGE_AUTHENTICATOR, auth_cipher)?;
    let auth: Authenticator = parse(&plain)?;
    let auth = auth.0;
    if auth.crealm.0 .0.to_string() != part.crealm.0 .0.to_string()
        || name(&auth.cname.0) != name(&part.cname.0)
    {
        return Err(KrbError::WrongClient);
    }
    let ctime = seconds(&auth.ctime.0).ok_or(KrbError::Malformed)?;
    if ctime.abs_diff(now) > skew {
        return Err(KrbError::Skew);
    }
    check_gss_checksum(auth.cksum.0.as_ref().map(|c| &c.0))?;
    let session_key = match auth.subkey.0.as_ref() {
        Some(sub) => Zeroizing::new(sub.0.key_value.0 .0.clone()),
        None => key.clone(),
    };

    // The BIT STRING's bytes start with its count of unused bits.
    let options = ap_req.0.ap_options.0 .0.as_bytes();
    let mutual = options.get(1).is_some_and(|b| b & MUTUAL_REQUIRED != 0);
    let reply = if mutual {
        let rep_part = ApplicationTag::<EncApRepPartInner, 27>::from(EncApRepPartInner {
            ctime: ExplicitContextTag0::from(auth.ctime.0.clone()),
            cusec: ExplicitContextTag1::from(auth.cusec.0.clone()),
            subkey: Optional::from(None),
            seq_number: Optional::from(
                auth.seq_number
                    .0
                    .as_ref()
                    .map(|s| ExplicitContextTag3::from(s.0.clone())),
            ),
        });
        let rep_plain = picky_asn1_der::to_vec(&rep_part).map_err(|_| KrbError::Malformed)?;
        let cipher = encrypt(key_type, &key, USAGE_AP_REP, &rep_plain)?;
        let ap_rep: ApRep = ApplicationTag::from(ApRepInner {
            pvno: ExplicitContextTag0::from(IntegerAsn1::from(vec![5])),
            msg_type: ExplicitContextTag1::from(IntegerAsn1::from(vec![15])),
            enc_part: ExplicitContextTag2::from(EncryptedData {
                etype: ExplicitContextTag0::from(IntegerAsn1::from(vec![key_type as u8])),
                kvno: Optional::from(None),
                cipher: ExplicitContextTag2::from(OctetStringAsn1::from(cipher)),
            }),
        });
        let rep = picky_asn1_der::to_vec(&ap_rep).map_err(|_| KrbError::Malformed)?;
        let mut body = der::tlv(OID, OID_KRB5);
        body.extend_from_slice(&TOK_AP_REP);
        body.extend_from_slice(&rep);
        der::tlv(APPLICATION_0, &body)
    } else {
        Vec::new()
    };
    Ok(Accepted {
        client: name(&part.cname.0),
        realm: part.crealm.0 .0.to_string(),
        session_key,
        end_time,
        reply,
        ctime,
        cusec: uint(&auth.cusec.0),
    })
}

/// The authenticator of a GSS-API AP-REQ carries a checksum of type
/// 0x8003 (RFC 4121 4.1.1): the 16-byte channel binding hash and the
/// context flags. copyless binds no channel, so the hash is not compared
/// (as MIT and Windows do without bindings); DCE style asks for an
/// exchange SMB does not have.
fn check_gss_checksum(cksum: Option<&picky_krb::data_types::Checksum>) -> Result<(), KrbError> {
    let cksum = cksum.ok_or(KrbError::Malformed)?;
    let bytes = &cksum.checksum.0 .0;
    if uint(&cksum.cksumtype.0) != CKSUM_GSS || bytes.len() < 24 || bytes[..4] != [16, 0, 0, 0] {
        return Err(KrbError::Malformed);
    }
    let flags = u32::from_le_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]);
    if flags & GSS_DCE_STYLE != 0 {
        return Err(KrbError::Malformed);
    }
    Ok(())
}

/// Decodes a Kerberos structure, once our own reader has found every
/// length in it sound (see [`der::well_formed`]).
fn parse<'a, T: serde::Deserialize<'a>>(data: &'a [u8]) -> Result<T, KrbError> {
    if !der::well_formed(data) {
        return Err(KrbError::Malformed);
    }
    picky_asn1_der::from_bytes(data).map_err(|_| KrbError::Malformed)
}

fn suite(etype: i32) -> Result<CipherSuite, KrbError> {
    // Only the AES types: DES3 and RC4 are long broken.
    match etype {
        AES128 => Ok(CipherSuite::Aes128CtsHmacSha196),
        AES256 => Ok(CipherSuite::Aes256CtsHmacSha196),
        _ => Err(KrbError::NoKey),
    }
}

fn decrypt(etype: i32, key: &[u8], usage: i32, data: &[u8]) -> Result<Vec<u8>, KrbError> {
    suite(etype)?
        .cipher()
        .decrypt(key, usage, data)
        .map_err(|_| KrbError::Integrity)
}

fn encrypt(etype: i32, key: &[u8], usage: i32, data: &[u8]) -> Result<Vec<u8>, KrbError> {
    suite(etype)?
        .cipher()
        .encrypt(key, usage, data)
        .map_err(|_| KrbError::Integrity)
}

/// `a/b` from a PrincipalName.
fn name(p: &PrincipalName) -> String {
    let parts: Vec<String> = p.name_string.0 .0.iter().map(|s| s.to_string()).collect();
    parts.join("/")
}

/// A small non-negative INTEGER (an encryption type).
fn int(i: &IntegerAsn1) -> i32 {
    i32::try_from(uint(i)).unwrap_or(i32::MAX)
}

/// A non-negative INTEGER, saturating.
fn uint(i: &IntegerAsn1) -> u64 {
    i.as_unsigned_bytes_be().iter().fold(0u64, |acc, &b| {
        acc.saturating_mul(256).saturating_add(u64::from(b))
    })
}

/// Seconds since 1970 of a KerberosTime (UTC, no fractions).
fn seconds(t: &KerberosTime) -> Option<u64> {
    let d = &t.0;
    let (y, m) = (i64::from(d.year()), i64::from(d.month()));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d.day()) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400
        + i64::from(d.hour()) * 3600
        + i64::from(d.minute()) * 60
        + i64::from(d.second());
    u64::try_from(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYTAB: &[u8] = include_bytes!("../../../docs/kerberos/server.keytab");
    const TOKEN: &[u8] = include_bytes!("../../../docs/kerberos/smbtorture-negtokeninit.bin");
    /// 2026-11-24 15:53:36 UTC, when smbtorture made the token; the
    /// ticket ends 4 s later.
    const ISSUED: u64 = 1_795_535_616;

    /// The krb5 GSS token inside smbtorture's SPNEGO NegTokenInit.
    fn krb5_token() -> Vec<u8> {
        let init = crate::spnego::parse_init(TOKEN).unwrap();
        assert_eq!(init.mech_types[0], OID_MS_KRB5);
        init.mech_token.unwrap().to_vec()
    }

    #[test]
    fn accepts_smbtortures_ticket_while_it_lasts() {
        let keytab = crate::keytab::parse(KEYTAB).unwrap();
        let a = accept(&krb5_token(), &keytab, ISSUED + 1, 5).unwrap();
        assert_eq!(
            (a.client.as_str(), a.realm.as_str()),
            ("alice", "COPYLESS.TEST")
        );
        assert_eq!(a.end_time, ISSUED + 4);
        // The authenticator's subkey, as the research found it.
        assert_eq!(a.session_key.len(), 32);
        assert_eq!(&a.session_key[..4], &[0x32, 0x73, 0x2d, 0x8c]);
        assert_eq!(
            a.reply.first(),
            Some(&APPLICATION_0),
            "mutual authentication"
        );
    }

    #[test]
    fn refuses_an_ended_ticket_a_wrong_key_and_garbage() {
        let keytab = crate::keytab::parse(KEYTAB).unwrap();
        let token = krb5_token();
        assert_eq!(
            accept(&token, &keytab, ISSUED + 10, 5).err(),
            Some(KrbError::TicketTime)
        );
        let mut wrong = crate::keytab::parse(KEYTAB).unwrap();
        for e in &mut wrong {
            e.key[0] ^= 1;
        }
        assert_eq!(
            accept(&token, &wrong, ISSUED + 1, 5).err(),
            Some(KrbError::Integrity)
        );
        for n in 0..token.len() {
            assert!(accept(&token[..n], &keytab, ISSUED + 1, 5).is_err());
        }
    }

    #[test]
    fn the_service_refuses_a_replay_another_realm_and_services() {
        let keytab = || crate::keytab::parse(KEYTAB).unwrap();
        let token = krb5_token();
        let service = KerberosService::new(keytab(), "copyless.test".into(), 5);
        assert_eq!(service.accept(&token, ISSUED + 1).unwrap().client, "alice");
        assert_eq!(
            service.accept(&token, ISSUED + 2).err(),
            Some(KrbError::Replay)
        );
        let other = KerberosService::new(keytab(), "OTHER.TEST".into(), 5);
        assert_eq!(
            other.accept(&token, ISSUED + 1).err(),
            Some(KrbError::NotAUser)
        );
    }
}
