//! The io_uring engine: one worker thread per core, each running a compio
//! runtime on its own ring. The first ring accepts and deals connections
//! out in turn (see `accept`); each is a task on its worker (see
//! `connection`). Every operation a loop turn starts goes to the kernel
//! with one `io_uring_enter`.

mod accept;
mod aside;
mod connection;
mod data;
mod held;
#[cfg(test)]
mod tests;

use std::io;
use std::net::TcpListener;
use std::num::NonZero;
use std::os::unix::net::UnixStream;
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use copyless_core::Server;
use copyless_trace::Tracer;
use futures_channel::{mpsc, oneshot};
use futures_util::StreamExt;

use crate::admission::Table;
use crate::logons::Logons;
use crate::post::PostOffice;
use crate::{end_all, wait_for_stop, Accepted, Connections, LiveLimits};

/// Entries of each ring's submission queue.
const RING_ENTRIES: u32 = 1024;

/// Buffers in each ring's receive pool, of `RECV_CHUNK` bytes each. A
/// buffer is held only from the moment bytes arrive until the frames in
/// them are cut out, in the same turn of the loop, so this bounds how
/// many connections of one ring may receive in one turn; past it a
/// receive fails with ENOBUFS and is retried with a buffer of its own.
const RECV_POOL_BUFFERS: u16 = 128;

pub struct Engine {
    workers: Vec<Worker>,
    post: Arc<PostOffice>,
}

struct Worker {
    to: mpsc::UnboundedSender<ToWorker>,
    thread: JoinHandle<()>,
}

/// What a worker is told to do.
enum ToWorker {
    Serve(Accepted),
    Listen(accept::Listen),
}

/// Everything a worker's connections share.
#[derive(Clone)]
pub(crate) struct Shared {
    pub server: Arc<Server>,
    pub limits: Arc<LiveLimits>,
    pub tracer: Arc<Tracer>,
    pub logons: Arc<Logons>,
    pub post: Arc<PostOffice>,
    /// This ring has a pool for receives (kernel 5.19 and later).
    pub pooled_receives: bool,
}

/// A ring with `pool_buffers` buffers in its receive pool.
fn runtime(pool_buffers: u16) -> io::Result<compio::runtime::Runtime> {
    let mut proactor = compio::driver::ProactorBuilder::new();
    proactor
        .capacity(RING_ENTRIES)
        .buffer_pool_size(NonZero::new(pool_buffers).unwrap_or(NonZero::<u16>::MIN))
        .buffer_pool_buffer_len(connection::RECV_CHUNK);
    compio::runtime::RuntimeBuilder::new()
        .with_proactor(proactor)
        .build()
}

impl Engine {
    /// Starts the workers; an error when the kernel refuses io_uring.
    pub fn new(
        server: &Arc<Server>,
        limits: &Arc<LiveLimits>,
        tracer: &Arc<Tracer>,
        logons: &Arc<Logons>,
    ) -> io::Result<Engine> {
        let shared = Shared {
            server: server.clone(),
            limits: limits.clone(),
            tracer: tracer.clone(),
            logons: logons.clone(),
            post: Arc::default(),
            pooled_receives: false,
        };
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut workers = Vec::with_capacity(n);
        for i in 0..n {
            let (tx, rx) = mpsc::unbounded();
            let (ready_tx, ready_rx) = std_mpsc::channel();
            let shared = shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("uring-{i}"))
                .spawn(move || worker(rx, shared, ready_tx))?;
            match ready_rx.recv() {
                Ok(Ok(())) => workers.push(Worker { to: tx, thread }),
                Ok(Err(e)) => {
                    let _ = thread.join();
                    return Err(e);
                }
                Err(_) => return Err(io::Error::other("worker thread ended")),
            }
        }
        Ok(Engine {
            workers,
            post: shared.post,
        })
    }

    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// The post office its connections read their letters from.
    pub(crate) fn post(&self) -> Arc<PostOffice> {
        self.post.clone()
    }

    /// Serves until `stop`: the first ring accepts on `listeners`; then
    /// accepting stops, every connection finishes the request it is
    /// running and closes its opens, and this returns.
    pub fn run(
        self,
        listeners: Vec<TcpListener>,
        limits: &Arc<LiveLimits>,
        stop: &UnixStream,
    ) -> io::Result<()> {
        let connections: Connections = Arc::new(Mutex::new(Table::new(limits.get().admission)));
        let (stop_accepting, accepting_stop) = oneshot::channel();
        let (stopped_tx, stopped) = std_mpsc::channel();
        let listen = accept::Listen {
            listeners,
            limits: limits.clone(),
            connections: connections.clone(),
            workers: self.workers.iter().map(|w| w.to.clone()).collect(),
            stop: accepting_stop,
            stopped: stopped_tx,
        };
        let sent = self.workers[0].to.unbounded_send(ToWorker::Listen(listen));
        let waited = match sent {
            Ok(()) => wait_for_stop(stop),
            Err(_) => Err(io::Error::other("worker thread ended")),
        };
        let _ = stop_accepting.send(());
        // No connection is let in after this: every one is told to end.
        let _ = stopped.recv();
        end_all(&connections);
        for w in self.workers {
            drop(w.to);
            let _ = w.thread.join();
        }
        waited
    }
}

/// A worker: serves the connections it is handed until the accept loop
/// stops, then until they have all ended.
fn worker(
    mut told: mpsc::UnboundedReceiver<ToWorker>,
    mut shared: Shared,
    ready: std_mpsc::Sender<io::Result<()>>,
) {
    let rt = match runtime(RECV_POOL_BUFFERS) {
        Ok(rt) => {
            let _ = ready.send(Ok(()));
            rt
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    // Made now, once: a receive between frames takes its buffer from it.
    match rt.buffer_pool() {
        Ok(_) => shared.pooled_receives = true,
        Err(e) => eprintln!("copyless: io_uring receive buffer pool unavailable ({e})"),
    }
    rt.block_on(async move {
        let live = std::rc::Rc::new(std::cell::Cell::new(0usize));
        while let Some(what) = told.next().await {
            match what {
                ToWorker::Serve(c) => {
                    live.set(live.get() + 1);
                    let live = live.clone();
                    let shared = shared.clone();
                    compio::runtime::spawn(async move {
                        connection::serve(c, shared).await;
                        live.set(live.get() - 1);
                    })
                    .detach();
                }
                ToWorker::Listen(l) => compio::runtime::spawn(accept::listen(l)).detach(),
            }
        }
        while live.get() > 0 {
            compio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}
