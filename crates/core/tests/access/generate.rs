//! Random scenes for the differential tests: people, folders and files
//! with owners, groups, modes, stored descriptors and read-only marks, and
//! the CREATEs, renames and owner changes they try.

use crate::reference::*;

/// xorshift64*: small, seeded, the same on every run.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize].clone()
    }
}

/// The family group alice and bob share; carol is not in it.
pub const FAMILY: u32 = 5100;

/// The people of a scene: the first is who asks when only one may.
pub fn people(root: bool) -> Vec<Person> {
    if !root {
        let uid = rustix::process::geteuid().as_raw();
        let gid = rustix::process::getegid().as_raw();
        let mut groups: Vec<u32> = rustix::process::getgroups()
            .unwrap_or_default()
            .iter()
            .map(|g| g.as_raw())
            .collect();
        groups.push(gid);
        return vec![Person { uid, gid, groups }];
    }
    vec![
        Person {
            uid: 5001,
            gid: 5001,
            groups: vec![5001, FAMILY],
        },
        Person {
            uid: 5002,
            gid: 5002,
            groups: vec![5002, FAMILY],
        },
        Person {
            uid: 5003,
            gid: 5003,
            groups: vec![5003],
        },
    ]
}

const FILE_MODES: [u32; 12] = [
    0o644, 0o664, 0o660, 0o600, 0o666, 0o444, 0o640, 0o604, 0o000, 0o222, 0o400, 0o606,
];
const DIR_MODES: [u32; 12] = [
    0o755, 0o775, 0o770, 0o700, 0o711, 0o1777, 0o2770, 0o555, 0o777, 0o1770, 0o751, 0o733,
];

const MASKS: [u32; 20] = [
    ALL,
    GENERIC_READ_RIGHTS,
    GENERIC_WRITE_RIGHTS,
    GENERIC_EXECUTE_RIGHTS,
    READ_DATA,
    WRITE_DATA,
    APPEND_DATA,
    DELETE,
    DELETE_CHILD,
    READ_ATTRIBUTES,
    WRITE_ATTRIBUTES,
    READ_CONTROL,
    WRITE_DAC | WRITE_OWNER,
    WRITE_DATA | DELETE_CHILD,
    GENERIC_ALL,
    GENERIC_READ,
    GENERIC_WRITE,
    GENERIC_READ | GENERIC_EXECUTE,
    SYNCHRONIZE | READ_ATTRIBUTES,
    0,
];

fn mask(rng: &mut Rng) -> u32 {
    if rng.chance(10) {
        // Any mix of the specific rights.
        rng.next() as u32 & ALL
    } else {
        rng.pick(&MASKS)
    }
}

fn sid(rng: &mut Rng, people: &[Person]) -> Sid {
    match rng.below(7) {
        0 | 1 => Sid::User(rng.pick(people).uid),
        2 => Sid::Group(if rng.chance(50) {
            FAMILY
        } else {
            rng.pick(people).gid
        }),
        3 => Sid::Everyone,
        4 => Sid::AuthenticatedUsers,
        5 => Sid::OwnerRights,
        _ => Sid::User(rng.pick(people).uid),
    }
}

pub fn sd(rng: &mut Rng, people: &[Person]) -> Sd {
    let owner = rng.chance(25).then(|| sid(rng, people));
    let dacl = match rng.below(100) {
        0..=3 => Dacl::Null,
        4..=13 => Dacl::Open,
        _ => {
            let mut aces: Vec<Ace> = (0..rng.below(5))
                .map(|_| Ace {
                    allow: rng.chance(70),
                    inherit_only: rng.chance(8),
                    sid: sid(rng, people),
                    mask: mask(rng),
                })
                .collect();
            // Many real DACLs end by giving everyone something.
            if rng.chance(40) {
                let mask = rng.pick(&[
                    ALL,
                    GENERIC_READ_RIGHTS | GENERIC_EXECUTE_RIGHTS,
                    GENERIC_ALL,
                ]);
                aces.push(Ace {
                    allow: true,
                    inherit_only: false,
                    sid: Sid::Everyone,
                    mask,
                });
            }
            Dacl::Aces(aces)
        }
    };
    Sd { owner, dacl }
}

pub fn node(rng: &mut Rng, people: &[Person], is_dir: bool, stored: u64) -> Node {
    let owner = rng.pick(people);
    Node {
        uid: owner.uid,
        gid: if rng.chance(40) { FAMILY } else { owner.gid },
        mode: if is_dir {
            rng.pick(&DIR_MODES)
        } else {
            rng.pick(&FILE_MODES)
        },
        sd: rng.chance(stored).then(|| sd(rng, people)),
        read_only: !is_dir && rng.chance(10),
    }
}

pub fn desired(rng: &mut Rng) -> u32 {
    let mut d = mask(rng);
    if rng.chance(5) {
        d |= MAXIMUM_ALLOWED;
    }
    if rng.chance(15) {
        d = MAXIMUM_ALLOWED | if rng.chance(50) { 0 } else { READ_ATTRIBUTES };
    }
    d
}

/// A CREATE of an existing object in a folder of the share.
pub fn scene(rng: &mut Rng, people: &[Person], with_other: bool) -> (Scene, Open) {
    let is_dir = rng.chance(15);
    let stream = (!is_dir && rng.chance(20)).then(|| rng.chance(50));
    let who = rng.pick(people);
    let mut parent = node(rng, people, true, 25);
    let mut object = node(rng, people, is_dir, 40);
    // Most files people open are their own, in folders they may use.
    if rng.chance(50) {
        object.uid = who.uid;
    }
    if rng.chance(50) {
        parent.mode = rng.pick(&[0o755, 0o777, 0o1777, 0o2775]);
    }
    let scene = Scene {
        who,
        parent,
        object,
        is_dir,
        stream,
        read_only_share: rng.chance(12),
        other: (with_other && rng.chance(30)).then(|| {
            let access = rng.pick(&[
                READ_DATA,
                WRITE_DATA,
                DELETE,
                READ_ATTRIBUTES,
                READ_DATA | WRITE_DATA,
                READ_DATA | DELETE,
            ]);
            (access, rng.below(8) as u32)
        }),
    };
    let disposition = if is_dir {
        rng.pick(&[OPEN, OPEN_IF])
    } else {
        rng.pick(&[
            OPEN,
            OPEN_IF,
            OVERWRITE,
            OVERWRITE_IF,
            SUPERSEDE,
            CREATE,
            OPEN_IF,
        ])
    };
    let open = Open {
        desired: desired(rng),
        disposition,
        share: rng.below(8) as u32,
        mxac: rng.chance(30),
    };
    (scene, open)
}
