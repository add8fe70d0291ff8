//! CREATE contexts: names too short to be one, a snapshot asked for, an
//! unknown one, and the allocation a new file asks for (AlSi).

use copyless_proto::client::{self as wire, CreateReply};
use copyless_proto::create_context as cc;
use copyless_proto::status;
use copyless_scripted::{config, memory_server, Client, Request, Users};
use std::sync::Arc;

fn setup() -> Client {
    let users = Arc::new(Users::default());
    users.add("u", "pw");
    let (server, _vfs) = memory_server(config(), users);
    Client::login(server, "u", "pw")
}

/// A CREATE (OVERWRITE_IF) of "new" with these contexts.
fn create_with(contexts: &[(&[u8], Vec<u8>)]) -> Request {
    let contexts = cc::build_chain(contexts);
    copyless_scripted::create_request_from(&wire::CreateParams {
        oplock_level: 0,
        desired_access: 0x0012_019f,
        file_attributes: 0,
        share_access: 7,
        disposition: 5,
        options: 0x40,
        name: "new",
        contexts: &contexts,
    })
}

#[test]
fn create_contexts_are_checked_and_the_allocation_asked_for_is_made() {
    let mut a = setup();
    for short in [&b"x"[..], b"xx", b"xxx"] {
        let r = a.call(create_with(&[(short, Vec::new())]));
        assert_eq!(
            r.status(),
            status::INVALID_PARAMETER,
            "a name of {} bytes",
            short.len()
        );
    }
    let r = a.call(create_with(&[(cc::TWRP, 1u64.to_le_bytes().to_vec())]));
    assert_eq!(
        r.status(),
        status::OBJECT_NAME_NOT_FOUND,
        "no snapshots here"
    );
    let r = a.call(create_with(&[(b"FooO", Vec::new())]));
    assert_eq!(r.status(), status::SUCCESS, "unknown contexts are ignored");
    let r = a.call(create_with(&[(
        cc::ALSI,
        (1u64 << 20).to_le_bytes().to_vec(),
    )]));
    assert_eq!(r.status(), status::SUCCESS);
    let c = CreateReply::parse(&r.msg).unwrap();
    assert!(
        c.times.allocation_size >= 1 << 20,
        "allocated: {}",
        c.times.allocation_size
    );
}
