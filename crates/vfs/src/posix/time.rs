//! Conversion between Unix timestamps and Windows FILETIME (100 ns units
//! since 1601-01-01 UTC).

/// 1970-01-01 00:00:00 UTC as a FILETIME.
pub const UNIX_EPOCH_AS_FILETIME: u64 = 116_444_736_000_000_000;

const TICKS_PER_SEC: i128 = 10_000_000;

/// A Unix time (seconds, nanoseconds) as a FILETIME; times before 1601
/// clamp to 0.
pub fn filetime_from_unix(sec: i64, nsec: u32) -> u64 {
    let ticks = i128::from(sec) * TICKS_PER_SEC
        + i128::from(nsec / 100)
        + i128::from(UNIX_EPOCH_AS_FILETIME);
    u64::try_from(ticks.max(0)).unwrap_or(u64::MAX)
}

/// A FILETIME as a Unix time (seconds, nanoseconds); times before 1970 give
/// negative seconds with non-negative nanoseconds.
pub fn unix_from_filetime(ft: u64) -> (i64, u32) {
    let rel = i128::from(ft) - i128::from(UNIX_EPOCH_AS_FILETIME);
    // Every u64 FILETIME divided by 10^7 fits an i64, so these never fail.
    let sec = i64::try_from(rel.div_euclid(TICKS_PER_SEC)).unwrap_or(i64::MAX);
    let nsec = u32::try_from(rel.rem_euclid(TICKS_PER_SEC) * 100).unwrap_or(0);
    (sec, nsec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_epoch() {
        assert_eq!(filetime_from_unix(0, 0), 116_444_736_000_000_000);
        assert_eq!(unix_from_filetime(116_444_736_000_000_000), (0, 0));
    }

    #[test]
    fn year_2000() {
        // 2000-01-01T00:00:00Z, a commonly quoted FILETIME value.
        assert_eq!(filetime_from_unix(946_684_800, 0), 125_911_584_000_000_000);
        assert_eq!(
            unix_from_filetime(125_911_584_000_000_000),
            (946_684_800, 0)
        );
    }

    #[test]
    fn sub_second_precision_is_100ns() {
        let ft = filetime_from_unix(1, 123_456_789);
        assert_eq!(ft, UNIX_EPOCH_AS_FILETIME + 10_000_000 + 1_234_567);
        assert_eq!(unix_from_filetime(ft), (1, 123_456_700));
    }

    #[test]
    fn before_1970_and_before_1601() {
        assert_eq!(
            unix_from_filetime(UNIX_EPOCH_AS_FILETIME - 1),
            (-1, 999_999_900)
        );
        assert_eq!(
            filetime_from_unix(-1, 999_999_900),
            UNIX_EPOCH_AS_FILETIME - 1
        );
        assert_eq!(filetime_from_unix(i64::MIN, 0), 0);
        assert_eq!(unix_from_filetime(0), (-11_644_473_600, 0));
    }
}
