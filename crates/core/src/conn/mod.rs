//! One connection: [`Connection`](connection::Connection), what it keeps
//! per session, tree connect and channel, how a request is dispatched,
//! signed, credited, held and resumed, and the letters connections send
//! each other.

pub mod auditing;
pub mod channels;
pub mod connection;
pub mod credits;
pub mod encryption;
pub mod negotiate;
pub mod pending;
pub mod post;
pub mod removals;
pub mod session;
pub mod tree;
pub mod waiting;
