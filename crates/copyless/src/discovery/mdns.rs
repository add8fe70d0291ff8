//! mDNS/DNS-SD with the `mdns-sd` crate: the server as `_smb._tcp` (what
//! Finder's sidebar and `avahi-browse` list) and as `_device-info._tcp`
//! with a model (which picks Finder's icon), the way Samba announces
//! itself through Avahi.
//!
//! The crate runs its own responder thread: it answers queries, probes
//! for name conflicts (and renames on one), follows address changes on
//! the interfaces it was given and sends goodbyes on unregister.

use std::time::Duration;

use mdns_sd::{DaemonEvent, IfKind, ServiceDaemon, ServiceInfo};

use super::Reach;
use copyless_engine::log_limit::RateLimit;

const SMB: &str = "_smb._tcp.local.";
const DEVICE_INFO: &str = "_device-info._tcp.local.";
/// How long stopping waits for the responder to send its goodbyes.
const GOODBYE_WAIT: Duration = Duration::from_secs(1);

pub struct Announcer {
    daemon: ServiceDaemon,
    names: Vec<String>,
}

impl Announcer {
    pub fn start(
        reach: &Reach,
        server_name: &str,
        port: u16,
        model: &str,
    ) -> Result<Announcer, mdns_sd::Error> {
        let daemon = ServiceDaemon::new()?;
        // The crate starts with every interface, loopback included: keep
        // only what the SMB listeners cover.
        daemon.disable_interface(IfKind::All)?;
        let mut kinds = Vec::new();
        if reach.all_v4 {
            kinds.push(IfKind::IPv4);
        }
        if reach.all_v6 {
            kinds.push(IfKind::IPv6);
        }
        kinds.extend(reach.addrs.iter().map(|ip| IfKind::Addr(*ip)));
        daemon.enable_interface(kinds)?;
        daemon.disable_interface(vec![IfKind::LoopbackV4, IfKind::LoopbackV6])?;
        watch(&daemon)?;

        // The host name the records point at: the server's own, so that
        // it is the same name a client sees in SMB.
        let host = format!("{}.local.", server_name.to_ascii_lowercase());
        let smb = ServiceInfo::new(SMB, server_name, &host, (), port, None)?.enable_addr_auto();
        // Port 0: it describes the device, not a service (as Avahi does).
        let device = ServiceInfo::new(
            DEVICE_INFO,
            server_name,
            &host,
            (),
            0,
            &[("model", model)][..],
        )?
        .enable_addr_auto();
        let names = vec![
            smb.get_fullname().to_string(),
            device.get_fullname().to_string(),
        ];
        daemon.register(smb)?;
        daemon.register(device)?;
        eprintln!(
            "copyless: discovery: mDNS announces {server_name} as _smb._tcp on port {port} and \
             _device-info._tcp (model={model})"
        );
        Ok(Announcer { daemon, names })
    }

    /// Unregisters both services (the responder sends goodbye packets,
    /// so browsers drop the server at once) and ends the responder.
    pub fn stop(self) {
        for name in &self.names {
            if let Ok(status) = self.daemon.unregister(name) {
                let _ = status.recv_timeout(GOODBYE_WAIT);
            }
        }
        if let Ok(status) = self.daemon.shutdown() {
            let _ = status.recv_timeout(GOODBYE_WAIT);
        }
    }
}

/// Reports the responder's errors and renames on standard error, from a
/// thread that ends when the responder does.
fn watch(daemon: &ServiceDaemon) -> Result<(), mdns_sd::Error> {
    static ERRORS: RateLimit = RateLimit::new(Duration::from_secs(60));
    let events = daemon.monitor()?;
    let spawned = std::thread::Builder::new()
        .name("mdns-monitor".into())
        .spawn(move || {
            while let Ok(event) = events.recv() {
                match event {
                    DaemonEvent::Error(e) => ERRORS.log(|| format!("discovery: mDNS: {e}")),
                    DaemonEvent::NameChange(change) => eprintln!(
                        "copyless: discovery: mDNS: {} is taken on the network; announced as {}",
                        change.original, change.new_name
                    ),
                    _ => {}
                }
            }
        });
    // Without the thread the announcements still go out, unreported.
    if let Err(e) = spawned {
        eprintln!("copyless: discovery: mDNS errors will not be reported: {e}");
    }
    Ok(())
}
