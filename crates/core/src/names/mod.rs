//! The names handlers work on: paths beneath a share, wildcard patterns,
//! 8.3 short names, and the listings an enumeration keeps.

pub mod enumeration;
pub mod hiding;
pub mod path;
pub mod wildcard;
#[cfg(any(test, feature = "reference"))]
pub mod wildcard_reference;
