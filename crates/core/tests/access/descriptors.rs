//! The model's trustees and descriptors as the server stores them, and
//! the SIDs a session of the model's people holds.

use copyless_fscc::descriptor::{
    sids, Ace, Descriptor, ACCESS_ALLOWED_ACE_TYPE, ACCESS_DENIED_ACE_TYPE, INHERIT_ONLY_ACE,
};

use crate::reference::{Dacl, Person, Sd, Sid};

/// The SID the server's token holds for a trustee of the model.
pub fn sid(s: Sid) -> Vec<u8> {
    match s {
        Sid::User(uid) => sids::unix_user(uid),
        Sid::Group(gid) => sids::unix_group(gid),
        Sid::Everyone => sids::EVERYONE.to_vec(),
        Sid::AuthenticatedUsers => sids::AUTHENTICATED_USERS.to_vec(),
        Sid::OwnerRights => sids::OWNER_RIGHTS.to_vec(),
    }
}

/// The model's descriptor as the server stores it.
pub fn descriptor(sd: &Sd) -> Descriptor {
    let aces = match &sd.dacl {
        Dacl::Aces(aces) => Some(aces),
        Dacl::Null | Dacl::Open => None,
    };
    Descriptor {
        control: 0x8000
            | if matches!(sd.dacl, Dacl::Open) {
                0
            } else {
                0x0004
            },
        owner: sd.owner.map(sid),
        group: None,
        dacl: aces.map(|aces| {
            aces.iter()
                .map(|a| {
                    let kind = if a.allow {
                        ACCESS_ALLOWED_ACE_TYPE
                    } else {
                        ACCESS_DENIED_ACE_TYPE
                    };
                    let flags = if a.inherit_only { INHERIT_ONLY_ACE } else { 0 };
                    Ace::new(kind, flags, a.mask, &sid(a.sid))
                })
                .collect()
        }),
        sacl: None,
    }
}

/// The SIDs a session of `p` holds (security::Caller::token's, less the
/// machine account SID no descriptor here names).
pub fn token(p: &Person) -> Vec<Vec<u8>> {
    let mut t = vec![sids::unix_user(p.uid), sids::unix_group(p.gid)];
    t.extend(p.groups.iter().map(|&g| sids::unix_group(g)));
    t.push(sids::EVERYONE.to_vec());
    t.push(sids::AUTHENTICATED_USERS.to_vec());
    t
}
