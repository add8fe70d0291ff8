//! Accepting on a ring: one multishot accept per listener on the first
//! worker's ring, so a new connection costs no system call of its own
//! (no poll, no accept that finds nothing) and no thread switch; the
//! connections are dealt out to the workers in turn.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use compio::buf::{BufResult, IntoInner};
use compio::driver::op::AcceptMulti;
use compio::runtime::SubmitMulti;
use futures_channel::{mpsc, oneshot};
use futures_util::stream::FusedStream;
use futures_util::StreamExt;

use super::ToWorker;
use crate::{admit, lock, Connections, LiveLimits};
use crate::{ACCEPT_FAILED, FIRST_BACKOFF, MAX_BACKOFF, START_FAILED};

/// What a ring needs to accept on the server's behalf.
pub(super) struct Listen {
    pub listeners: Vec<TcpListener>,
    pub limits: Arc<LiveLimits>,
    pub connections: Connections,
    /// Every worker, in turn, this ring's own too.
    pub workers: Vec<mpsc::UnboundedSender<ToWorker>>,
    /// Stop accepting, drop the listeners, and say so on `stopped`.
    pub stop: oneshot::Receiver<()>,
    pub stopped: std::sync::mpsc::Sender<()>,
}

/// Accepts on every listener until told to stop.
pub(super) async fn listen(l: Listen) {
    let Listen {
        listeners,
        limits,
        connections,
        workers,
        stop,
        stopped,
    } = l;
    let workers = Arc::new(workers);
    let mut tasks = Vec::new();
    for listener in listeners {
        let (limits, connections, workers) = (limits.clone(), connections.clone(), workers.clone());
        tasks.push(compio::runtime::spawn(accept(
            Arc::new(listener),
            limits,
            connections,
            workers,
        )));
    }
    let _ = stop.await;
    // Dropping a task cancels its multishot accept and closes its
    // listener.
    drop(tasks);
    drop(workers);
    let _ = stopped.send(());
}

async fn accept(
    listener: Arc<TcpListener>,
    limits: Arc<LiveLimits>,
    connections: Connections,
    workers: Arc<Vec<mpsc::UnboundedSender<ToWorker>>>,
) {
    let mut next = 0usize;
    let mut backoff: Option<Duration> = None;
    loop {
        let mut accepting = Some(compio::runtime::submit_multi(AcceptMulti::new(
            listener.clone(),
        )));
        while let Some(a) = accepting.as_mut() {
            let Some(BufResult(r, _)) = a.next().await else {
                break;
            };
            let stream = match r {
                // The last completion of an accept that ended (a kernel
                // without multishot accept, a full completion queue)
                // leaves the descriptor with the operation.
                Ok(_) if a.is_terminated() => match accepting.take().map(SubmitMulti::try_take) {
                    Some(Ok(op)) => Ok(TcpStream::from(op.into_inner())),
                    _ => continue,
                },
                Ok(fd) => own(fd),
                Err(e) => Err(e),
            };
            let stream = match stream {
                Ok(s) => {
                    backoff = None;
                    s
                }
                Err(e) if passing(&e) => continue,
                Err(e) => {
                    // Out of descriptors or memory: a pause, then again.
                    let step = backoff.map_or(FIRST_BACKOFF, |d| (d * 2).min(MAX_BACKOFF));
                    ACCEPT_FAILED
                        .log(|| format!("accept: {e}; not accepting for {} ms", step.as_millis()));
                    backoff = Some(step);
                    drop(accepting.take());
                    compio::time::sleep(step).await;
                    break;
                }
            };
            // The client may be gone already.
            let Ok(peer) = stream.peer_addr() else {
                continue;
            };
            let Some(accepted) = admit(stream, peer, &limits, &connections) else {
                continue;
            };
            let id = accepted.id;
            let worker = &workers[next % workers.len()];
            next = next.wrapping_add(1);
            if worker.unbounded_send(ToWorker::Serve(accepted)).is_err() {
                lock(&connections).remove(id);
                START_FAILED.log(|| format!("cannot serve {peer}: worker thread ended"));
            }
        }
    }
}

/// The connection a completion of the multishot accept hands over.
fn own(fd: usize) -> io::Result<TcpStream> {
    let fd = i32::try_from(fd).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: the kernel created this descriptor for the accepted
    // connection and gave it to us alone with this completion; nothing
    // else owns or closes it.
    Ok(TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Accept errors that concern one connection, not the listener.
fn passing(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
    )
}
