//! The io_uring engine: one loop per core, each over its own ring with no
//! runtime between them (see `examples/lean_ring`: a loop so made costs
//! what a thread per connection costs, where one on a general-purpose
//! runtime cost 7-18 us per request more). The first loop accepts and
//! deals connections out in turn (`worker`); each connection is driven
//! by its loop's calls (`conn`). What a turn of the loop starts goes to
//! the kernel in the `io_uring_enter` that waits for the next
//! completions, after looking a little longer while completions have
//! been coming soon (`poll`). Work with no ring operation runs on a pool
//! of threads (`pool`), never on a loop.

mod aside;
mod bell;
mod conn;
mod data;
mod held;
mod ops;
mod poll;
mod pool;
mod recv_pool;
mod room;
#[cfg(test)]
mod tests;
mod worker;

pub use worker::Engine;
