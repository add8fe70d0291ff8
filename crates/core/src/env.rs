//! What the core needs from the world, supplied by the engine: the time
//! and randomness. The core never reads a clock or the kernel itself.

pub trait Env {
    /// Now, as a Windows FILETIME (100 ns units since 1601).
    fn now(&self) -> u64;
    fn fill_random(&mut self, buf: &mut [u8]);
}
