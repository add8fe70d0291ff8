//! Feeds what Samba's client sends into a `Pipe` and has Samba's own NDR
//! parser (python3-samba, strict: no trailing bytes allowed) decode every
//! reply. Needs `/usr/bin/python3` with the `samba` module (Debian
//! `python3-samba`), hence ignored by default:
//! `cargo test -p copyless-rpc -- --ignored`.

use std::io::Write;
use std::process::{Command, Stdio};

use copyless_rpc::{Pipe, ShareInfo, ShareKind};

/// Samba's bind: srvsvc/NDR20 plus a bind time feature negotiation item.
const SAMBA_BIND: &str = "05000b03100000007400000001000000b810b81000000000\
    0200000000000100c84f324b7016d30112785a47bf6ee18803000000045d888aeb1cc9119fe8\
    08002b1048600200000001000100c84f324b7016d30112785a47bf6ee188030000002c1cb76c\
    12984045030000000000000001000000";
/// NetShareEnumAll level 1 stub as Samba marshals it.
const SAMBA_SHARE_ENUM_ALL_L1: &str = "000002000c000000000000000c0000005c005c00\
    3100320037002e0030002e0030002e00310000000100000001000000040002000000000000000000\
    ffffffff0800020000000000";

const CHECK: &str = r#"
import sys
from samba.dcerpc import dcerpc, srvsvc
from samba.ndr import ndr_unpack, ndr_unpack_out
data = bytes.fromhex(sys.stdin.read().strip())
at, stub = 0, b""
while at < len(data):
    flen = int.from_bytes(data[at + 8:at + 10], "little")
    p = ndr_unpack(dcerpc.ncacn_packet, data[at:at + flen], allow_remaining=False)
    if p.ptype == dcerpc.DCERPC_PKT_BIND_ACK:
        print("ack", p.u.secondary_address, [(c.result, c.reason) for c in p.u.ctx_list])
    elif p.ptype == dcerpc.DCERPC_PKT_RESPONSE:
        stub += bytes(p.u.stub_and_verifier)
    at += flen
r = srvsvc.NetShareEnumAll()
ndr_unpack_out(r, stub, allow_remaining=False)
for a in r.out_info_ctr.ctr.array:
    print("share", a.name, hex(a.type), a.comment)
print("total", r.out_totalentries)
"#;

fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s
        .bytes()
        .filter(u8::is_ascii_hexdigit)
        .map(|c| (c as char).to_digit(16).unwrap() as u8)
        .collect();
    digits.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
}

fn request_pdu(call_id: u32, opnum: u16, stub: &[u8]) -> Vec<u8> {
    let len = (24 + stub.len()) as u16;
    let mut pdu = vec![5, 0, 0, 3, 0x10, 0, 0, 0];
    pdu.extend_from_slice(&len.to_le_bytes());
    pdu.extend_from_slice(&0u16.to_le_bytes());
    pdu.extend_from_slice(&call_id.to_le_bytes());
    pdu.extend_from_slice(&(stub.len() as u32).to_le_bytes());
    pdu.extend_from_slice(&0u16.to_le_bytes());
    pdu.extend_from_slice(&opnum.to_le_bytes());
    pdu.extend_from_slice(stub);
    pdu
}

#[test]
#[ignore = "needs python3-samba"]
fn samba_parses_bind_ack_and_fragmented_share_list() {
    let mut shares: Vec<ShareInfo> = (0..120)
        .map(|i| ShareInfo {
            browseable: true,
            name: format!("share{i}"),
            kind: ShareKind::Disk,
            comment: format!("Comment {i}"),
            path: format!("/srv/share{i}"),
        })
        .collect();
    shares.push(ShareInfo {
        browseable: true,
        name: "IPC$".into(),
        kind: ShareKind::Ipc,
        comment: "IPC Service".into(),
        path: String::new(),
    });
    let mut pipe = Pipe::new("\\PIPE\\srvsvc", "HOST", shares);
    pipe.write(&unhex(SAMBA_BIND)).unwrap();
    pipe.write(&request_pdu(2, 15, &unhex(SAMBA_SHARE_ENUM_ALL_L1)))
        .unwrap();
    let out = pipe.read(usize::MAX);
    let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();

    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", CHECK])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run /usr/bin/python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(hex.as_bytes())
        .unwrap();
    let result = child.wait_with_output().unwrap();
    assert!(
        result.status.success(),
        "Samba's parser refused the replies"
    );
    let text = String::from_utf8(result.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "ack \\PIPE\\srvsvc [(0, 0), (3, 2)]");
    assert_eq!(lines[1], "share share0 0x0 Comment 0");
    assert_eq!(lines[121], "share IPC$ 0x80000003 IPC Service");
    assert_eq!(lines[122], "total 121");
}
