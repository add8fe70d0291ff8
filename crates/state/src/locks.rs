//! Byte-range locks as Windows keeps them (MS-FSA 2.1.5.7), in the
//! server's own table rather than as POSIX locks, whose rules differ
//! (they merge, belong to processes, and never stop a read or a write).
//!
//! - An exclusive lock conflicts with every lock it overlaps, its own
//!   open's included; a shared lock only with other opens' exclusive ones.
//! - Reading is refused where another open holds an exclusive lock;
//!   writing wherever any open holds a shared lock, or another open an
//!   exclusive one.
//! - A range of no bytes stops no read or write; as a lock it meets only
//!   a lock of bytes on both sides of it (a zero-byte lock at 10 meets
//!   {9, 2}, not {10, 1} nor {9, 1}), as Windows has it.

use copyless_proto::status::{self, NtStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteLock {
    /// The open that holds it (its volatile file id).
    pub open: u64,
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

/// Whether [offset, offset + length) and the lock's range share a byte;
/// ends are computed wide, as a range may reach past u64::MAX.
fn overlaps(lock: &ByteLock, offset: u64, length: u64) -> bool {
    let (a, b) = (u128::from(lock.offset), u128::from(offset));
    lock.length != 0 && length != 0 && a < b + u128::from(length) && b < a + u128::from(lock.length)
}

/// Whether a point lies strictly inside a range: it has bytes of the
/// range on both sides.
fn inside(point: u64, offset: u64, length: u64) -> bool {
    let (p, a) = (u128::from(point), u128::from(offset));
    a < p && p < a + u128::from(length)
}

/// Whether two locks' ranges meet, by Windows' rule for ranges of no
/// bytes.
fn meets(lock: &ByteLock, offset: u64, length: u64) -> bool {
    match (lock.length, length) {
        (0, 0) => false,
        (0, _) => inside(lock.offset, offset, length),
        (_, 0) => inside(offset, lock.offset, lock.length),
        _ => overlaps(lock, offset, length),
    }
}

/// Whether `new` may be added to `held`.
pub fn may_lock(held: &[ByteLock], new: &ByteLock) -> bool {
    !held.iter().any(|l| {
        meets(l, new.offset, new.length) && (new.exclusive || (l.exclusive && l.open != new.open))
    })
}

/// Whether `open` may read (or, with `write`, write) the range.
pub fn may_access(held: &[ByteLock], open: u64, offset: u64, length: u64, write: bool) -> bool {
    !held.iter().any(|l| {
        overlaps(l, offset, length) && ((l.exclusive && l.open != open) || (write && !l.exclusive))
    })
}

/// Locks one open may hold on a file: far more than applications take,
/// and few enough that checking a lock against all of them stays cheap
/// whatever a client sends.
pub const MAX_LOCKS_PER_OPEN: usize = 1024;

/// Takes every lock of `new` (all of one open) or none: on a conflict the
/// ones taken are given back and the answer is LOCK_NOT_GRANTED; past
/// [`MAX_LOCKS_PER_OPEN`], INSUFFICIENT_RESOURCES.
pub fn lock_all(held: &mut Vec<ByteLock>, new: &[ByteLock]) -> Result<(), NtStatus> {
    if let Some(first) = new.first() {
        let mine = held.iter().filter(|l| l.open == first.open).count();
        if mine + new.len() > MAX_LOCKS_PER_OPEN {
            return Err(status::INSUFFICIENT_RESOURCES);
        }
    }
    let before = held.len();
    for lock in new {
        if !may_lock(held, lock) {
            held.truncate(before);
            return Err(status::LOCK_NOT_GRANTED);
        }
        held.push(*lock);
    }
    Ok(())
}

/// Removes the lock of `open` on exactly this range, an exclusive one
/// before a shared one stacked on it (as Windows does); RANGE_NOT_LOCKED
/// when there is none.
pub fn unlock(
    held: &mut Vec<ByteLock>,
    open: u64,
    offset: u64,
    length: u64,
) -> Result<(), NtStatus> {
    let mine = |l: &ByteLock| l.open == open && l.offset == offset && l.length == length;
    let at = held
        .iter()
        .position(|l| mine(l) && l.exclusive)
        .or_else(|| held.iter().position(mine))
        .ok_or(status::RANGE_NOT_LOCKED)?;
    held.remove(at);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(open: u64, offset: u64, length: u64, exclusive: bool) -> ByteLock {
        ByteLock {
            open,
            offset,
            length,
            exclusive,
        }
    }

    #[test]
    fn windows_rules() {
        let held = vec![lock(1, 10, 10, false), lock(2, 100, 10, true)];
        // Shared locks stack; an exclusive one meets any overlap.
        assert!(may_lock(&held, &lock(2, 15, 10, false)));
        assert!(!may_lock(&held, &lock(1, 15, 10, true)));
        assert!(!may_lock(&held, &lock(1, 105, 1, false)));
        assert!(
            may_lock(&held, &lock(2, 105, 1, false)),
            "its own exclusive lock"
        );
        assert!(
            may_lock(&held, &lock(1, 20, 80, true)),
            "ends touch, no overlap"
        );
        assert!(
            may_lock(&held, &lock(1, 10, 0, true)),
            "no bytes, at an end"
        );
        assert!(!may_lock(&held, &lock(1, 12, 0, true)), "no bytes, inside");
        // Reads stop at others' exclusive locks, writes at any shared one.
        assert!(may_access(&held, 3, 0, 50, false));
        assert!(!may_access(&held, 3, 0, 50, true));
        assert!(!may_access(&held, 1, 10, 1, true), "its own shared lock");
        assert!(!may_access(&held, 1, 109, 5, false));
        assert!(may_access(&held, 2, 100, 10, true));
        // Ranges that reach the end of the offsets.
        let top = vec![lock(1, u64::MAX - 1, u64::MAX, true)];
        assert!(!may_lock(&top, &lock(2, u64::MAX, 1, false)));
    }

    /// smbtorture smb2.lock.zerobytelength's table, either way round and
    /// from either open.
    #[test]
    fn zero_byte_locks_meet_only_locks_around_them() {
        let cases = [
            ((10, 0), (10, 0), true),
            ((10, 0), (9, 1), true),
            ((10, 0), (10, 1), true),
            ((10, 0), (11, 1), true),
            ((10, 0), (9, 2), false),
            ((10, 0), (10, 2), true),
            ((10, 0), (9, 3), false),
            ((0, 0), (0, 0), true),
        ];
        for ((o1, l1), (o2, l2), granted) in cases {
            for (a, b) in [((o1, l1), (o2, l2)), ((o2, l2), (o1, l1))] {
                for other in [1, 2] {
                    let held = [lock(1, a.0, a.1, true)];
                    assert_eq!(
                        may_lock(&held, &lock(other, b.0, b.1, true)),
                        granted,
                        "{a:?} then {b:?} by open {other}"
                    );
                }
            }
        }
        // A zero-byte lock stops no read or write.
        assert!(may_access(&[lock(1, 10, 0, true)], 2, 0, 100, true));
    }

    #[test]
    fn unlock_takes_the_exclusive_lock_first() {
        let mut held = vec![lock(1, 10, 0, false), lock(1, 10, 0, true)];
        unlock(&mut held, 1, 10, 0).unwrap();
        assert_eq!(held, vec![lock(1, 10, 0, false)]);
    }

    #[test]
    fn all_or_nothing_and_exact_unlock() {
        let mut held = vec![lock(2, 50, 10, true)];
        let r = lock_all(&mut held, &[lock(1, 0, 10, true), lock(1, 55, 1, true)]);
        assert_eq!(r, Err(status::LOCK_NOT_GRANTED));
        assert_eq!(held, vec![lock(2, 50, 10, true)]);
        assert_eq!(unlock(&mut held, 1, 50, 10), Err(status::RANGE_NOT_LOCKED));
        assert_eq!(unlock(&mut held, 2, 50, 9), Err(status::RANGE_NOT_LOCKED));
        let many: Vec<ByteLock> = (0..MAX_LOCKS_PER_OPEN as u64)
            .map(|i| lock(3, 1000 + i, 1, false))
            .collect();
        assert_eq!(lock_all(&mut held, &many[..MAX_LOCKS_PER_OPEN - 1]), Ok(()));
        assert_eq!(
            lock_all(&mut held, &many[..2]),
            Err(status::INSUFFICIENT_RESOURCES),
            "one open's locks are bounded"
        );
        assert_eq!(
            lock_all(&mut held, &[lock(4, 0, 1, false)]),
            Ok(()),
            "others' are not"
        );
        held.retain(|l| l.open == 2);
        unlock(&mut held, 2, 50, 10).unwrap();
        assert!(held.is_empty());
    }
}
