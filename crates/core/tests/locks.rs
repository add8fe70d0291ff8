//! Byte-range locks between two opens of one file, each on its own
//! connection, as Windows keeps them.

use copyless_proto::command;
use copyless_proto::messages::{
    FileId, LOCKFLAG_EXCLUSIVE, LOCKFLAG_FAIL_IMMEDIATELY, LOCKFLAG_SHARED, LOCKFLAG_UNLOCK,
};
use copyless_proto::status;
use copyless_scripted::{
    config, create_request, memory_server, put_file, read_request, Client, Request, Users,
};
use std::sync::Arc;

fn lock(id: FileId, ranges: &[(u64, u64, u32)]) -> Request {
    Request::new(command::LOCK, 1, |w| {
        w.u16(48).u16(ranges.len() as u16).u32(0);
        w.u64(id.persistent).u64(id.volatile);
        for &(offset, length, flags) in ranges {
            w.u64(offset).u64(length).u32(flags).u32(0);
        }
    })
}

const EX: u32 = LOCKFLAG_EXCLUSIVE | LOCKFLAG_FAIL_IMMEDIATELY;
const SH: u32 = LOCKFLAG_SHARED | LOCKFLAG_FAIL_IMMEDIATELY;

#[test]
fn locks_stop_other_opens_until_unlocked_or_closed() {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, vfs) = memory_server(config(), users);
    put_file(vfs.as_ref(), "f", &[7; 64]);
    let mut a = Client::login(server.clone(), "u", "pw");
    let mut b = Client::login(server, "u", "pw");
    let fa = a.open(create_request("f", false)).unwrap();
    let fb = b.open(create_request("f", false)).unwrap();

    assert_eq!(a.call(lock(fa, &[(0, 10, EX)])).status(), status::SUCCESS);
    assert_eq!(
        b.call(read_request(fb, 5, 1, 1)).status(),
        status::FILE_LOCK_CONFLICT
    );
    assert_eq!(
        b.call(lock(fb, &[(9, 1, SH)])).status(),
        status::LOCK_NOT_GRANTED
    );
    // All or nothing: the first range would be free, the second is not.
    assert_eq!(
        b.call(lock(fb, &[(20, 5, EX), (0, 1, EX)])).status(),
        status::LOCK_NOT_GRANTED
    );
    assert_eq!(
        a.call(lock(fa, &[(20, 5, EX)])).status(),
        status::SUCCESS,
        "20..25 was given back"
    );
    // Unlocking takes the exact range; several elements must all fail at once.
    assert_eq!(
        a.call(lock(fa, &[(0, 9, LOCKFLAG_UNLOCK)])).status(),
        status::RANGE_NOT_LOCKED
    );
    assert_eq!(
        b.call(lock(fb, &[(40, 1, LOCKFLAG_SHARED), (50, 1, SH)]))
            .status(),
        status::INVALID_PARAMETER
    );
    // UNLOCK takes no other flag, not even FAIL_IMMEDIATELY.
    assert_eq!(
        a.call(lock(
            fa,
            &[(0, 10, LOCKFLAG_UNLOCK | LOCKFLAG_FAIL_IMMEDIATELY)]
        ))
        .status(),
        status::INVALID_PARAMETER
    );
    assert_eq!(
        a.call(lock(fa, &[(0, 10, LOCKFLAG_UNLOCK)])).status(),
        status::SUCCESS
    );
    assert_eq!(b.call(read_request(fb, 5, 1, 1)).status(), status::SUCCESS);
    // Closing gives back what the open still holds.
    assert_eq!(a.close(fa), status::SUCCESS);
    assert_eq!(b.call(lock(fb, &[(20, 5, EX)])).status(), status::SUCCESS);
}
