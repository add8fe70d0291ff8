//! The fallback engine: each connection gets a thread doing plain
//! blocking reads and writes, and performs its data intents itself
//! through the share's VFS.

mod connection;
mod timing;

use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

use copyless_core::Server;
use copyless_trace::Tracer;

use crate::logons::Logons;
use crate::post::PostOffice;
use crate::{Accepted, LiveLimits, Serve};

pub struct Engine {
    server: Arc<Server>,
    limits: Arc<LiveLimits>,
    tracer: Arc<Tracer>,
    logons: Arc<Logons>,
    post: Arc<PostOffice>,
    threads: Vec<JoinHandle<()>>,
}

impl Engine {
    pub fn new(
        server: Arc<Server>,
        limits: Arc<LiveLimits>,
        tracer: Arc<Tracer>,
        logons: Arc<Logons>,
    ) -> Engine {
        Engine {
            server,
            limits,
            tracer,
            logons,
            post: Arc::default(),
            threads: Vec::new(),
        }
    }

    /// The post office its connections read their letters from.
    pub(crate) fn post(&self) -> Arc<PostOffice> {
        self.post.clone()
    }
}

impl Serve for Engine {
    fn start(&mut self, c: Accepted) -> io::Result<()> {
        self.threads.retain(|t| !t.is_finished());
        let server = self.server.clone();
        let preauth_timeout = self.limits.get().preauth_timeout;
        let tracer = self.tracer.clone();
        let logons = self.logons.clone();
        let post = self.post.clone();
        let t = std::thread::Builder::new()
            .name(format!("conn-{}", c.id))
            .spawn(move || {
                let outlets = connection::Outlets {
                    tracer: &tracer,
                    logons: &logons,
                    post: &post,
                };
                connection::serve(server, &c.stream, preauth_timeout, outlets, || {
                    c.authenticated()
                });
                c.finished();
            })?;
        self.threads.push(t);
        Ok(())
    }

    fn finish(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}
