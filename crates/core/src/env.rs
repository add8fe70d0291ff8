//! What the core needs from the world, supplied by the engine: the time
//! and randomness. The core never reads a clock or the kernel itself.

pub trait Env {
    /// Now, as a Windows FILETIME (100 ns units since 1601).
    fn now(&self) -> u64;
    fn fill_random(&mut self, buf: &mut [u8]);

    /// Whether the core may wait for a filesystem where it is called:
    /// false on a thread that serves other connections too (an engine's
    /// loop), which hands the core only what [`crate::Connection::may_block`]
    /// and its kin clear. A held request let go there runs again there
    /// only where its frame would; others wait for a tick
    /// ([`crate::Connection::timeout`] is zero), which
    /// [`crate::Connection::timeout_may_block`] sends elsewhere.
    fn may_wait(&self) -> bool {
        true
    }
}
