//! The rpc target: DCE/RPC over a named pipe (bind, alter context,
//! fragmented requests, srvsvc calls), as WRITE and IOCTL carry it.
//!
//! Input: one byte choosing the pipe (even: srvsvc, odd: one we do not
//! serve), then records (see [`crate::records`]): a record starting with
//! an even byte writes the rest to the pipe, an odd one reads as many
//! bytes as the next two say. The output the pipe holds stays bounded
//! whatever is written.

use copyless_rpc::{Pipe, ShareInfo, ShareKind};

use crate::records;

/// The pipe's own bound on unread output, plus one reply that may take
/// it past.
const MAX_HELD: usize = 1024 * 1024 + 256 * 1024;

pub fn run(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let name = if which % 2 == 0 { "srvsvc" } else { "lsarpc" };
    let shares = vec![
        ShareInfo {
            browseable: true,
            name: "share".into(),
            kind: ShareKind::Disk,
            comment: String::new(),
            path: "C:\\share".into(),
        },
        ShareInfo {
            browseable: true,
            name: "IPC$".into(),
            kind: ShareKind::Ipc,
            comment: "IPC Service".into(),
            path: String::new(),
        },
    ];
    let mut pipe = Pipe::new(name, "FUZZ", shares);
    for record in records(rest) {
        let Some((&op, body)) = record.split_first() else {
            continue;
        };
        if op % 2 == 0 {
            let _ = pipe.write(body);
        } else {
            let max = body
                .first_chunk::<2>()
                .map_or(0, |b| u16::from_le_bytes(*b));
            let out = pipe.read(usize::from(max));
            assert!(out.len() <= usize::from(max));
        }
        assert!(pipe.pending() <= MAX_HELD, "{} bytes held", pipe.pending());
    }
}
