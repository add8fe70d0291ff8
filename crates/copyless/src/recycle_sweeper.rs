//! Empties the shares' recycle bins of what stayed in them longer than
//! their `recycle_keep_days` (copyless_core::recycle): at start, every
//! hour, and at each reload.

use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use copyless_core::Server;

/// How often the bins are looked through.
const EVERY: Duration = Duration::from_secs(3600);

/// Starts the sweeper; a message on the sender it gives back has it
/// sweep at once.
pub fn start(server: Arc<Server>) -> std::io::Result<Sender<()>> {
    let (wake, woken) = channel();
    std::thread::Builder::new()
        .name("recycle-bins".into())
        .spawn(move || loop {
            sweep(&server);
            match woken.recv_timeout(EVERY) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        })?;
    Ok(wake)
}

fn sweep(server: &Server) {
    let now = copyless_engine::filetime_now();
    for (_, share) in server.shares.all() {
        let Some(bin) = &share.recycle else { continue };
        match bin.expire(share.vfs.as_ref(), now) {
            Ok(0) => {}
            Ok(n) => eprintln!(
                "copyless: share {}: {n} files left the recycle bin after {} days",
                share.name,
                bin.keep_days()
            ),
            Err(e) => eprintln!(
                "copyless: share {}: cannot empty the recycle bin: {e}",
                share.name
            ),
        }
    }
}
