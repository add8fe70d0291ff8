//! Users' disk quotas over SMB: QUERY_INFO and SET_INFO of
//! SMB2_0_INFO_QUOTA (MS-SMB2 3.3.5.20.4, 3.3.5.21.4), on any handle of
//! a share or on the quota file Windows keeps at
//! `$Extend\$Quota:$Q:$INDEX_ALLOCATION` (which smbcquotas opens).
//!
//! Entries name users by SID: Samba's Unix SIDs (S-1-22-1-uid, as the
//! owners in security descriptors) are given, and those and the users'
//! own SIDs under the machine SID are understood. Everyone may read
//! their own entry; the server's `quota_admins` may read every entry and
//! set limits, which the server does as itself (CAP_SYS_ADMIN).

use copyless_fscc::descriptor::sids;
use copyless_fscc::quota::{self, QuotaEntry, NO_LIMIT, REMOVE_ENTRY};
use copyless_proto::messages::{self, QueryInfoRequest};
use copyless_proto::status::{self, NtStatus};
use copyless_proto::utf16;
use copyless_proto::Writer;
use copyless_vfs::{attr, Identity, Quota};

use crate::conn::connection::{Compound, Connection, Reply, Req};
use crate::handlers::look::{self, Looked, Part, QuotaAsk, QuotaUsers};
use crate::handlers::Then;
use crate::open::OpenKind;
use crate::server::{includes, ServerConfig};

/// The name of Windows' quota file, from the share's root.
const QUOTA_FILE: &str = "$Extend\\$Quota:$Q:$INDEX_ALLOCATION";

/// What a CREATE of the quota file shows of it, as Windows does (smbtorture
/// smb2.create.quota-fake-file): no times, and these attributes.
pub(crate) const QUOTA_FILE_ATTRIBUTES: u32 =
    attr::HIDDEN | attr::SYSTEM | attr::DIRECTORY | attr::ARCHIVE;

/// An enumeration that went past the last entry.
const SCAN_ENDED: u64 = 1 << 32;

/// Entries one query reads at most, whatever room its reply has.
const MOST_PER_QUERY: usize = 256;

/// Whether a CREATE names the quota file. Every CREATE asks: a name of
/// another length is told apart without decoding it.
pub(crate) fn names_quota_file(name: &[u8]) -> bool {
    name.len() == 2 * QUOTA_FILE.len()
        && utf16::decode(name).is_ok_and(|n| n.eq_ignore_ascii_case(QUOTA_FILE))
}

/// The Unix user a SID names: S-1-22-1-uid, or S-1-5-21-machine-rid
/// with a user's rid (security.rs, `user_rid`).
fn uid_of(machine_sid: [u32; 3], sid: &[u8]) -> Option<u32> {
    let last = u32::from_le_bytes(sid.get(sid.len().checked_sub(4)?..)?.try_into().ok()?);
    if sid == sids::unix_user(last) {
        return Some(last);
    }
    let uid = last.checked_sub(1000).filter(|r| r % 2 == 0)? / 2;
    (sid == sids::machine_account(machine_sid, last)).then_some(uid)
}

/// A Linux entry as Windows shows it: no limit where none is set.
fn entry(sid: Vec<u8>, q: &Quota) -> QuotaEntry {
    let limit = |v: u64| if v == 0 { NO_LIMIT } else { v };
    QuotaEntry {
        sid,
        change_time: 0,
        used: q.used,
        threshold: limit(q.soft),
        limit: limit(q.hard),
    }
}

/// A limit a client gives as Linux keeps it: none for none (-1) or a
/// removed entry (-2), and a limit of nothing at all as the least Linux
/// can hold (0 would be none).
fn linux_limit(v: u64) -> u64 {
    match v {
        NO_LIMIT | REMOVE_ENTRY => 0,
        0 => 1,
        v => v,
    }
}

/// The limits a SET_INFO of quota information gives, by uid: (uid, soft,
/// hard), in bytes, 0 for none.
pub(crate) fn limits_to_set(
    config: &ServerConfig,
    buffer: &[u8],
) -> Result<Vec<(u32, u64, u64)>, NtStatus> {
    quota::parse_entries(buffer)
        .map_err(|e| e.ntstatus())?
        .iter()
        .map(|e| {
            let uid = uid_of(config.machine_sid, &e.sid).ok_or(status::NONE_MAPPED)?;
            Ok(if e.limit == REMOVE_ENTRY {
                (uid, 0, 0)
            } else {
                (uid, linux_limit(e.threshold), linux_limit(e.limit))
            })
        })
        .collect()
}

impl Connection {
    /// Whether the session is one of the server's quota administrators.
    pub(crate) fn quota_admin(&self, req: &Req<'_>) -> bool {
        let Some(session) = self.sessions.get(&req.session_id) else {
            return false;
        };
        if session.anonymous || session.guest {
            return false;
        }
        let groups = match &session.who {
            Identity::Unix(ids) => {
                let mut g = ids.groups.clone();
                g.push(ids.gid);
                g
            }
            Identity::Server => Vec::new(),
        };
        includes(&self.server.config.quota_admins, &session.user, &groups)
    }

    /// QUERY_INFO of quota information: the entries are read by a call,
    /// after which the query runs again with them (`looked`).
    pub(crate) fn query_quota(
        &mut self,
        req: &Req<'_>,
        compound: &mut Compound,
        reply: &mut Reply,
        w: &mut Writer,
        q: &QueryInfoRequest<'_>,
        looked: Option<Result<Box<Looked>, NtStatus>>,
    ) -> Result<NtStatus, NtStatus> {
        let query = quota::parse_query(q.input).map_err(|e| e.ntstatus())?;
        let admin = self.quota_admin(req);
        let server = self.server.clone();
        let config = &server.config;
        let open = self.open_mut(req, compound, q.file_id)?;
        let OpenKind::File(f) = &mut open.kind else {
            return Err(status::NOT_SUPPORTED);
        };
        let own = match f.handle.who() {
            Identity::Unix(ids) => ids.uid,
            Identity::Server => config.unix_uid,
        };
        // The SIDs asked for, at most one for a single entry, each with
        // the user it names.
        let take = if query.return_single { 1 } else { usize::MAX };
        let asked: Vec<(&[u8], Option<u32>)> = query
            .sids
            .iter()
            .take(take)
            .map(|&s| (s, uid_of(config.machine_sid, s)))
            .collect();
        let listing = asked.is_empty();
        let from = match (query.start_sid, query.restart_scan) {
            (Some(sid), _) => {
                u64::from(uid_of(config.machine_sid, sid).ok_or(status::NONE_MAPPED)?)
            }
            (None, true) => 0,
            (None, false) => f.quota_scan,
        };
        let what = if !listing {
            // Only an administrator reads another's entry.
            if !admin && asked.iter().any(|(_, uid)| uid.is_some_and(|u| u != own)) {
                return Err(status::ACCESS_DENIED);
            }
            QuotaUsers::These(asked.iter().filter_map(|(_, uid)| *uid).collect())
        } else if from >= SCAN_ENDED {
            return Err(status::NO_MORE_ENTRIES);
        } else if admin {
            let entry_size = 40 + sids::unix_user(0).len();
            let most = (q.output_buffer_length as usize / entry_size + 1).min(MOST_PER_QUERY);
            QuotaUsers::From {
                from: from as u32,
                most: take.min(most),
            }
        } else {
            // The others' entries are not shown: theirs alone is listed.
            QuotaUsers::These(if from <= u64::from(own) {
                vec![own]
            } else {
                Vec::new()
            })
        };
        let part = Part::Quotas(Box::new(QuotaAsk {
            who: if admin {
                Identity::Server
            } else {
                f.handle.who().clone()
            },
            what,
        }));
        let then = || Then::Query {
            msg: req.msg.to_vec(),
        };
        let Some(looked) = look::here_or_by_call(f, part, looked, reply, then) else {
            return Ok(status::SUCCESS);
        };
        let found = looked?.quotas;
        let entries: Vec<QuotaEntry> = if listing {
            found
                .iter()
                .map(|(uid, q)| entry(sids::unix_user(*uid), q))
                .collect()
        } else {
            // Each SID asked for gets an entry, one naming nobody an
            // empty one.
            let mut found = found.iter();
            asked
                .iter()
                .map(|(sid, uid)| {
                    let q = match uid {
                        Some(_) => found.next().map(|(_, q)| *q).unwrap_or_default(),
                        None => Quota::default(),
                    };
                    entry(sid.to_vec(), &q)
                })
                .collect()
        };
        if entries.is_empty() {
            f.quota_scan = SCAN_ENDED;
            return Err(status::NO_MORE_ENTRIES);
        }
        let (data, count) = quota::encode_entries(&entries, q.output_buffer_length as usize);
        if count == 0 {
            return Err(status::BUFFER_TOO_SMALL);
        }
        if listing {
            f.quota_scan = u64::from(found[count - 1].0) + 1;
        }
        messages::write_buffer_response(w, &data);
        Ok(status::SUCCESS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACHINE: [u32; 3] = [11, 22, 33];

    #[test]
    fn sids_name_users_both_ways() {
        let c = MACHINE;
        assert_eq!(uid_of(c, &sids::unix_user(1000)), Some(1000));
        let own = sids::machine_account(c, crate::security::user_rid(1000));
        assert_eq!(uid_of(c, &own), Some(1000));
        // Another machine's account, a group, a well-known SID.
        let other = sids::machine_account([1, 2, 3], crate::security::user_rid(1000));
        assert_eq!(uid_of(c, &other), None);
        assert_eq!(uid_of(c, &sids::unix_group(1000)), None);
        assert_eq!(uid_of(c, sids::EVERYONE), None);
        assert_eq!(uid_of(c, &[]), None);
    }

    #[test]
    fn the_quota_file_is_named_in_any_case() {
        let name = |s: &str| copyless_proto::utf16::encode(s);
        assert!(names_quota_file(&name(
            "$Extend\\$Quota:$Q:$INDEX_ALLOCATION"
        )));
        assert!(names_quota_file(&name(
            "$EXTEND\\$quota:$q:$index_allocation"
        )));
        assert!(!names_quota_file(&name("$Extend\\$Quota")));
        assert!(!names_quota_file(&name(
            "$Extend\\$Quota:$Q:$INDEX_ALLOCATIOM"
        )));
    }

    #[test]
    fn limits_keep_their_windows_meaning() {
        assert_eq!(linux_limit(NO_LIMIT), 0);
        assert_eq!(linux_limit(REMOVE_ENTRY), 0);
        assert_eq!(linux_limit(0), 1);
        assert_eq!(linux_limit(5 << 20), 5 << 20);
    }
}
