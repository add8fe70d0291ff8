//! Users' disk quotas over SMB, on a share in memory that counts each
//! user's use: listing and reading entries (an administrator every
//! user's, anyone else their own), setting limits, the volume's size as
//! a user's quota bounds it, Windows' quota file, and the answers where
//! a share keeps no quotas.

use std::sync::Arc;

use copyless_core::Principal;
use copyless_fscc::descriptor::sids;
use copyless_fscc::quota::{encode_entries, parse_entries, QuotaEntry, NO_LIMIT, REMOVE_ENTRY};
use copyless_proto::client as wire;
use copyless_proto::messages::FileId;
use copyless_proto::{command, status, HEADER_LEN};
use copyless_scripted::{create_request_with, write_request, Client, Request, Users};
use copyless_vfs::memory::MemoryVfs;

const INFO_FILESYSTEM: u8 = 2;
const INFO_QUOTA: u8 = 4;
const FS_SIZE_INFORMATION: u8 = 3;
const FS_ATTRIBUTE_INFORMATION: u8 = 5;
const FS_CONTROL_INFORMATION: u8 = 6;
const FS_FULL_SIZE_INFORMATION: u8 = 7;
const FILE_VOLUME_QUOTAS: u32 = 0x20;
const ALICE: u32 = 1001;
const BOB: u32 = 1002;
/// The size of an entry naming a user by S-1-22-1-uid.
const ENTRY: u32 = 56;
/// The memory share's allocation unit.
const UNIT: u64 = 4096;

/// alice administers quotas; bob does not. Each wrote a file.
fn share(quotas: bool) -> (Client, Client) {
    let users = Arc::new(Users::default());
    users.add("alice", "alice-pw");
    users.add("bob", "bob-pw");
    users.link("alice", ALICE, ALICE, vec![]);
    users.link("bob", BOB, BOB, vec![]);
    let mut config = copyless_scripted::config();
    config.act_as_users = true;
    config.quota_admins = vec![Principal::User("alice".into())];
    let vfs = if quotas {
        MemoryVfs::new().with_quotas()
    } else {
        MemoryVfs::new()
    };
    let server = copyless_scripted::server_over(Arc::new(vfs), "memory", config, users);
    let mut alice = Client::login(server.clone(), "alice", "alice-pw");
    let mut bob = Client::login(server, "bob", "bob-pw");
    for (c, name, len) in [(&mut alice, "a.bin", 10_000), (&mut bob, "b.bin", 5_000)] {
        let id = c.create(name, false).unwrap();
        assert_eq!(c.call(write_request(id, 0, &vec![7; len])).status(), 0);
        c.close(id);
    }
    (alice, bob)
}

/// The share's root, opened to read its attributes.
fn root(c: &mut Client) -> FileId {
    c.open(create_request_with("", 0x0012_0080, 7, 1, 0))
        .unwrap()
}

/// SMB2_QUERY_QUOTA_INFO: the SIDs asked for (none: an enumeration).
fn quota_query(single: bool, restart: bool, sids: &[Vec<u8>]) -> Vec<u8> {
    let mut list = Vec::new();
    for (i, s) in sids.iter().enumerate() {
        let next = if i + 1 == sids.len() { 0 } else { 8 + s.len() };
        list.extend((next as u32).to_le_bytes());
        list.extend((s.len() as u32).to_le_bytes());
        list.extend(s);
    }
    let mut q = vec![u8::from(single), u8::from(restart), 0, 0];
    q.extend((list.len() as u32).to_le_bytes());
    q.extend([0; 8]);
    q.extend(list);
    q
}

/// QUERY_INFO of quota information: the status and the entries.
fn query(c: &mut Client, id: FileId, input: &[u8], room: u32) -> (u32, Vec<QuotaEntry>) {
    let input = input.to_vec();
    let r = c.call(Request::new(command::QUERY_INFO, 1, move |w| {
        w.u16(41).u8(INFO_QUOTA).u8(0).u32(room);
        w.u16((HEADER_LEN + 40) as u16)
            .u16(0)
            .u32(input.len() as u32);
        w.u32(0).u32(0).u64(id.persistent).u64(id.volatile);
        w.bytes(&input);
    }));
    let entries = match r.status() {
        0 => parse_entries(wire::buffer_response_data(&r.msg).unwrap()).unwrap(),
        _ => Vec::new(),
    };
    (r.status(), entries)
}

fn set(c: &mut Client, id: FileId, entries: &[QuotaEntry]) -> u32 {
    let (buffer, _) = encode_entries(entries, usize::MAX);
    c.call(Request::new(command::SET_INFO, 1, |w| {
        wire::write_set_info_request(w, INFO_QUOTA, 0, 0, id, &buffer).unwrap()
    }))
    .status()
}

fn fs_info(c: &mut Client, id: FileId, class: u8) -> Vec<u8> {
    let r = c.call(Request::new(command::QUERY_INFO, 1, |w| {
        wire::write_query_info_request(w, INFO_FILESYSTEM, class, 4096, 0, 0, id)
    }));
    assert_eq!(r.status(), 0, "class {class}");
    wire::buffer_response_data(&r.msg).unwrap().to_vec()
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn limits(uid: u32, threshold: u64, limit: u64) -> QuotaEntry {
    QuotaEntry {
        sid: sids::unix_user(uid),
        change_time: 0,
        used: 0,
        threshold,
        limit,
    }
}

/// (uid, used, threshold, limit) of entries naming users by Unix SID.
fn users_of(entries: &[QuotaEntry]) -> Vec<(u32, u64, u64, u64)> {
    entries
        .iter()
        .map(|e| {
            assert_eq!(e.sid[..12], sids::unix_user(0)[..12], "a Unix user's SID");
            (u32_at(&e.sid, 12), e.used, e.threshold, e.limit)
        })
        .collect()
}

#[test]
fn an_administrator_lists_every_users_entry() {
    let (mut alice, _bob) = share(true);
    let id = root(&mut alice);
    let (st, entries) = query(&mut alice, id, &quota_query(false, true, &[]), 4096);
    assert_eq!(st, status::SUCCESS);
    // Root owns the share's folder; each user their file, in blocks.
    assert_eq!(
        users_of(&entries),
        vec![
            (0, 0, NO_LIMIT, NO_LIMIT),
            (ALICE, 3 * UNIT, NO_LIMIT, NO_LIMIT),
            (BOB, 2 * UNIT, NO_LIMIT, NO_LIMIT),
        ]
    );
    let (st, _) = query(&mut alice, id, &quota_query(false, false, &[]), 4096);
    assert_eq!(st, status::NO_MORE_ENTRIES);
    // RestartScan starts over, one entry at a time where only one fits.
    let mut seen = Vec::new();
    let mut restart = true;
    loop {
        let (st, entries) = query(&mut alice, id, &quota_query(false, restart, &[]), ENTRY);
        restart = false;
        if st == status::NO_MORE_ENTRIES {
            break;
        }
        assert_eq!((st, entries.len()), (status::SUCCESS, 1));
        seen.extend(users_of(&entries).into_iter().map(|e| e.0));
    }
    assert_eq!(seen, vec![0, ALICE, BOB]);
    // ReturnSingle: one entry, however much room.
    let (_, entries) = query(&mut alice, id, &quota_query(true, true, &[]), 4096);
    assert_eq!(entries.len(), 1);
    // No room for any: the buffer is too small.
    let (st, _) = query(&mut alice, id, &quota_query(false, true, &[]), ENTRY - 1);
    assert_eq!(st, status::BUFFER_TOO_SMALL);
}

#[test]
fn an_administrator_sets_limits_and_the_user_sees_them() {
    let (mut alice, mut bob) = share(true);
    let id = root(&mut alice);
    let (threshold, limit) = (1 << 20, 2 << 20);
    assert_eq!(set(&mut alice, id, &[limits(BOB, threshold, limit)]), 0);
    let ask = quota_query(true, true, &[sids::unix_user(BOB)]);
    let (_, entries) = query(&mut alice, id, &ask, 4096);
    assert_eq!(users_of(&entries), vec![(BOB, 2 * UNIT, threshold, limit)]);
    // bob's volume is his quota: its size the limit, its space what he
    // has left of it; the volume's own free space stays as it is.
    let bob_root = root(&mut bob);
    let full = fs_info(&mut bob, bob_root, FS_FULL_SIZE_INFORMATION);
    let unit = u64::from(u32_at(&full, 24) * u32_at(&full, 28));
    assert_eq!(unit, UNIT);
    assert_eq!(u64_at(&full, 0), limit / UNIT);
    assert_eq!(u64_at(&full, 8), (limit - 2 * UNIT) / UNIT);
    assert!(u64_at(&full, 16) > limit / UNIT);
    let size = fs_info(&mut bob, bob_root, FS_SIZE_INFORMATION);
    assert_eq!(
        (u64_at(&size, 0), u64_at(&size, 8)),
        (limit / UNIT, (limit - 2 * UNIT) / UNIT)
    );
    // alice has no limit: she sees the whole volume.
    let full = fs_info(&mut alice, id, FS_FULL_SIZE_INFORMATION);
    assert_eq!(u64_at(&full, 8), u64_at(&full, 16));
    // -2 removes the entry's limits.
    assert_eq!(
        set(&mut alice, id, &[limits(BOB, NO_LIMIT, REMOVE_ENTRY)]),
        0
    );
    let (_, entries) = query(&mut alice, id, &ask, 4096);
    assert_eq!(
        users_of(&entries),
        vec![(BOB, 2 * UNIT, NO_LIMIT, NO_LIMIT)]
    );
}

#[test]
fn a_user_sees_only_their_own_entry_and_sets_nothing() {
    let (_alice, mut bob) = share(true);
    let id = root(&mut bob);
    let (st, entries) = query(&mut bob, id, &quota_query(false, true, &[]), 4096);
    assert_eq!(st, status::SUCCESS);
    assert_eq!(
        users_of(&entries),
        vec![(BOB, 2 * UNIT, NO_LIMIT, NO_LIMIT)]
    );
    let (st, _) = query(&mut bob, id, &quota_query(false, false, &[]), 4096);
    assert_eq!(st, status::NO_MORE_ENTRIES);
    let (st, _) = query(
        &mut bob,
        id,
        &quota_query(true, true, &[sids::unix_user(ALICE)]),
        4096,
    );
    assert_eq!(st, status::ACCESS_DENIED);
    // His own SID under the machine SID names him too, and comes back
    // as asked; a SID naming nobody gets an empty entry.
    let own = sids::machine_account([11, 22, 33], copyless_core::security::user_rid(BOB));
    let ask = quota_query(false, true, &[own.clone(), sids::EVERYONE.to_vec()]);
    let (st, entries) = query(&mut bob, id, &ask, 4096);
    assert_eq!(st, status::SUCCESS);
    assert_eq!(entries.len(), 2);
    assert_eq!((entries[0].sid.clone(), entries[0].used), (own, 2 * UNIT));
    assert_eq!((entries[1].used, entries[1].limit), (0, NO_LIMIT));
    assert_eq!(
        set(&mut bob, id, &[limits(BOB, 0, 1 << 30)]),
        status::ACCESS_DENIED
    );
}

#[test]
fn bad_quota_requests_are_refused() {
    let (mut alice, _bob) = share(true);
    let id = root(&mut alice);
    let (st, _) = query(&mut alice, id, &[0; 15], 4096);
    assert_eq!(st, status::INVALID_PARAMETER);
    let mut bad_list = quota_query(false, true, &[sids::unix_user(BOB)]);
    bad_list[4] += 1;
    assert_eq!(
        query(&mut alice, id, &bad_list, 4096).0,
        status::INVALID_PARAMETER
    );
    let nobody = QuotaEntry {
        sid: sids::EVERYONE.to_vec(),
        ..limits(0, 1, 1)
    };
    assert_eq!(set(&mut alice, id, &[nobody]), status::NONE_MAPPED);
    assert_eq!(set(&mut alice, id, &[]), status::INVALID_PARAMETER);
}

#[test]
fn a_share_with_quotas_says_so() {
    let (mut alice, _bob) = share(true);
    let id = root(&mut alice);
    let attrs = fs_info(&mut alice, id, FS_ATTRIBUTE_INFORMATION);
    assert_ne!(u32_at(&attrs, 0) & FILE_VOLUME_QUOTAS, 0);
    // FILE_VC_QUOTA_TRACK | FILE_VC_QUOTA_ENFORCE.
    let control = fs_info(&mut alice, id, FS_CONTROL_INFORMATION);
    assert_eq!(u32_at(&control, 40), 3);
}

#[test]
fn a_share_without_quotas_has_none_to_give() {
    let (mut alice, _bob) = share(false);
    let id = root(&mut alice);
    let attrs = fs_info(&mut alice, id, FS_ATTRIBUTE_INFORMATION);
    assert_eq!(u32_at(&attrs, 0) & FILE_VOLUME_QUOTAS, 0);
    let control = fs_info(&mut alice, id, FS_CONTROL_INFORMATION);
    assert_eq!(u32_at(&control, 40), 0);
    let (st, _) = query(&mut alice, id, &quota_query(false, true, &[]), 4096);
    assert_eq!(st, status::NOT_SUPPORTED);
    let nobody = quota_query(false, true, &[sids::EVERYONE.to_vec()]);
    assert_eq!(
        query(&mut alice, id, &nobody, 4096).0,
        status::NOT_SUPPORTED
    );
    assert_eq!(
        set(&mut alice, id, &[limits(BOB, 0, 1 << 30)]),
        status::NOT_SUPPORTED
    );
}

#[test]
fn the_quota_file_opens_as_windows_shows_it() {
    let (mut alice, _bob) = share(true);
    // GENERIC_READ | GENERIC_WRITE, as smbcquotas opens it: granted on
    // the file, not on the share's folder.
    let r = alice.call(create_request_with(
        "$Extend\\$Quota:$Q:$INDEX_ALLOCATION",
        0xC000_0000,
        3,
        1,
        0,
    ));
    assert_eq!(r.status(), 0);
    let body = &r.msg[HEADER_LEN..];
    // Every time 0; HIDDEN | SYSTEM | DIRECTORY | ARCHIVE.
    assert_eq!(body[8..40], [0; 32]);
    assert_eq!(u32_at(body, 56), 0x36);
    let id = FileId {
        persistent: u64_at(body, 64),
        volatile: u64_at(body, 72),
    };
    let (st, entries) = query(&mut alice, id, &quota_query(false, true, &[]), 4096);
    assert_eq!((st, entries.len()), (status::SUCCESS, 3));
    // Nothing of the folder itself: its listing is refused.
    let r = alice.call(copyless_scripted::names_request(id, 0, "*", 4096));
    assert_eq!(r.status(), status::ACCESS_DENIED);
}
