//! Sizes and durations as the command line takes them.

/// Parses a byte count: a number with an optional binary suffix
/// (`k`, `KiB`, `KB` = 1024; `m`, `MiB`, `MB` = 1024²; `g`, `GiB`, `GB` =
/// 1024³), case-insensitive. `10k` and `10KB` are both 10240 bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 4096, 4k, 1MiB)"))?;
    let mult: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("{text:?}: unknown size suffix {suffix:?}")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Parses seconds, fractions allowed (`0.5`, `10`, `10s`).
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    let t = text.trim().trim_end_matches('s');
    let v: f64 = t
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(0.0..=86_400.0).contains(&v) {
        return Err(format!("{text:?}: seconds must be between 0 and 86400"));
    }
    Ok(v)
}

/// Parses a dialect name: 2.0.2, 2.1, 3.0, 3.0.2 or 3.1.1.
pub fn parse_dialect(text: &str) -> Result<u16, String> {
    match text.trim() {
        "2.0.2" | "2.02" => Ok(0x0202),
        "2.1" | "2.10" => Ok(0x0210),
        "3.0" | "3.00" => Ok(0x0300),
        "3.0.2" | "3.02" => Ok(0x0302),
        "3.1.1" | "3.11" => Ok(0x0311),
        _ => Err(format!(
            "{text:?} is not one of 2.0.2, 2.1, 3.0, 3.0.2, 3.1.1"
        )),
    }
}

pub fn dialect_name(d: u16) -> &'static str {
    match d {
        0x0202 => "2.0.2",
        0x0210 => "2.1",
        0x0300 => "3.0",
        0x0302 => "3.0.2",
        0x0311 => "3.1.1",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("10KB"), Ok(10240));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("8m"), Ok(8 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("99999999999999999999g").is_err());
        assert!(parse_size("18446744073709551615g").is_err());
    }

    #[test]
    fn seconds_and_dialects() {
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        assert_eq!(parse_seconds("10s"), Ok(10.0));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
        assert_eq!(parse_dialect("3.1.1"), Ok(0x0311));
        assert_eq!(parse_dialect("2.1"), Ok(0x0210));
        assert!(parse_dialect("1.0").is_err());
        assert_eq!(dialect_name(0x0302), "3.0.2");
    }
}
