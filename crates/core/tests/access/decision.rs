//! `rights::open`, the server's decision, fed the facts of random scenes
//! and checked against the reference's: many cases a second, so the run
//! can be long (COPYLESS_ACCESS_CASES sets how many; CI runs the default).

use copyless_core::access::{FILE_GENERIC_EXECUTE, FILE_GENERIC_READ};
use copyless_core::rights::{self, Ask, Facts};
use copyless_fscc::descriptor::{sids, Descriptor};
use copyless_proto::status::NtStatus;
use copyless_vfs::{Identity, UnixAccess};

use crate::generate::{self, Rng};
use crate::reference::{self as model, Node, Person, Scene};

/// The scene's facts, as the server's gatherer would find them on disk.
struct SceneFacts<'a> {
    scene: &'a Scene,
    token: Vec<Vec<u8>>,
}

fn identity(p: &Person) -> Identity {
    Identity::unix(p.uid, p.gid, p.groups.clone())
}

fn unix(node: &Node, who: &Person) -> UnixAccess {
    UnixAccess::from_mode(node.mode, node.uid, node.gid, &identity(who))
}

impl Facts for SceneFacts<'_> {
    fn own(&mut self, _wanted: u32) -> Result<u32, NtStatus> {
        let s = self.scene;
        let sd: Option<Descriptor> = s.object.sd.as_ref().map(crate::descriptors::descriptor);
        if let Some(sd) = sd.as_ref().filter(|sd| rights::decides(sd)) {
            let owner = sids::unix_user(s.object.uid);
            return Ok(rights::stored_rights(sd, &owner, &self.token));
        }
        let owner = s.object.uid == s.who.uid;
        let mut own = rights::derived(unix(&s.object, &s.who), owner, s.is_dir);
        if let Some(sd) = &sd {
            own |= rights::stored_owner_rights(sd, &self.token);
        }
        Ok(own)
    }

    fn parent(&mut self) -> Result<Option<u32>, NtStatus> {
        let p = &self.scene.parent;
        let sd: Option<Descriptor> = p.sd.as_ref().map(crate::descriptors::descriptor);
        Ok(sd
            .filter(rights::decides)
            .map(|sd| rights::stored_rights(&sd, &sids::unix_user(p.uid), &self.token)))
    }

    fn may_unlink(&mut self) -> Result<bool, NtStatus> {
        let s = self.scene;
        Ok(model::may_unlink(&s.parent, &s.object, &s.who))
    }

    fn may_write(&mut self) -> Result<bool, NtStatus> {
        Ok(unix(&self.scene.object, &self.scene.who).write)
    }
}

fn decided(scene: &Scene, open: &model::Open) -> Result<(u32, u32), u32> {
    let new_stream =
        scene.stream == Some(false) && !matches!(open.disposition, model::OPEN | model::OVERWRITE);
    let ask = Ask {
        desired: open.desired,
        implied: rights::implied(open.disposition, new_stream, scene.is_dir),
        tree_maximal: if scene.read_only_share {
            FILE_GENERIC_READ | FILE_GENERIC_EXECUTE
        } else {
            model::ALL
        },
        is_root: false,
        is_dir: scene.is_dir && scene.stream.is_none(),
        read_only_file: !scene.is_dir && scene.object.read_only,
        maximal_wanted: true,
    };
    let mut facts = SceneFacts {
        scene,
        token: crate::descriptors::token(&scene.who),
    };
    rights::open(&mut facts, &ask).map(|g| (g.granted, g.maximal))
}

#[test]
fn the_decision_agrees_with_the_reference() {
    let cases: u64 = std::env::var("COPYLESS_ACCESS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let people = generate::people(true);
    let mut rng = Rng::new(0xC0FF_EE00);
    let mut granted = 0;
    for case in 0..cases {
        let (scene, mut open) = generate::scene(&mut rng, &people, false);
        open.desired &= !0x0100_0000; // ACCESS_SYSTEM_SECURITY: refused before
        let want = model::decide(&scene, &open);
        let got = decided(&scene, &open);
        assert_eq!(got, want, "case {case}: {scene:#?}\n{open:#?}");
        granted += u64::from(want.is_ok());
    }
    // The generator must reach both answers often.
    assert!(
        granted > cases / 10 && granted < cases * 9 / 10,
        "{granted} of {cases} granted"
    );
    eprintln!("{cases} decisions agree ({granted} granted)");
}
