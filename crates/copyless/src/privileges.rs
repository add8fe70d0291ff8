//! What the server keeps of root's privileges once it has started: only
//! the capabilities its work needs, in every thread it starts after (each
//! inherits its maker's), with the rest gone from the bounding set too.

use std::io;

use rustix::thread::{
    capabilities, remove_capability_from_bounding_set, set_capabilities, CapabilitySet,
    CapabilitySets,
};

/// - SETUID, SETGID: each thread takes on the identity of the session it
///   works for;
/// - DAC_OVERRIDE, DAC_READ_SEARCH, FOWNER: the server's own file work,
///   whoever owns the files (the user store and state, the marker on a
///   share root that holds NT ACLs);
/// - CHOWN: a share directory made on a first start goes to its user;
/// - NET_BIND_SERVICE: listening on port 445.
pub const KEPT: CapabilitySet = CapabilitySet::SETUID
    .union(CapabilitySet::SETGID)
    .union(CapabilitySet::DAC_OVERRIDE)
    .union(CapabilitySet::DAC_READ_SEARCH)
    .union(CapabilitySet::FOWNER)
    .union(CapabilitySet::CHOWN)
    .union(CapabilitySet::NET_BIND_SERVICE);

/// Drops every capability but [`KEPT`] from this thread: call it before
/// the server starts any thread. Nothing to do without root.
pub fn keep_only_what_is_needed() -> io::Result<()> {
    let held = capabilities(None)?;
    if held.permitted.difference(KEPT).is_empty() {
        return Ok(());
    }
    // The bounding set first: dropping from it needs SETPCAP, which goes
    // next.
    if held.effective.contains(CapabilitySet::SETPCAP) {
        for cap in CapabilitySet::all().difference(KEPT).iter() {
            match remove_capability_from_bounding_set(cap) {
                // A capability this kernel does not know.
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    set_capabilities(
        None,
        CapabilitySets {
            effective: held.effective.intersection(KEPT),
            permitted: held.permitted.intersection(KEPT),
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(())
}
