//! 8.3 alternate names (FileAlternateNameInformation). Clients such as
//! smbclient's `allinfo` ask for them. A name that already fits 8.3 is its
//! own short name; others get a deterministic hashed name (the stem's
//! first characters, `~`, three hash characters, and the extension's
//! first three), computed, not stored, so it needs no state and survives
//! restarts. A lookup that finds no entry by a name of the hashed form
//! takes the entry whose short name it is ([`matches`]), as Windows opens
//! a file by either name.

const HASH_CHARS: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

fn valid_83_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'()-@^_`{}~".contains(c)
}

fn is_83(name: &str) -> bool {
    if name == "." || name == ".." {
        return true;
    }
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) => (s, Some(e)),
        None => (name, None),
    };
    let ok_part = |p: &str, max: usize| {
        !p.is_empty()
            && p.len() <= max
            && p.chars()
                .all(|c| valid_83_char(c) && !c.is_ascii_lowercase())
    };
    ok_part(stem, 8) && ext.is_none_or(|e| ok_part(e, 3))
}

pub fn short_name(name: &str) -> String {
    if is_83(&name.to_uppercase()) {
        return name.to_uppercase();
    }
    let upper: String = name.to_uppercase();
    let (stem, ext) = match upper.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s.to_string(), e.to_string()),
        _ => (upper.clone(), String::new()),
    };
    let clean = |s: &str, max: usize| -> String {
        s.chars().filter(|c| valid_83_char(*c)).take(max).collect()
    };
    let mut prefix = clean(&stem, 4);
    if prefix.is_empty() {
        prefix.push('_');
    }
    // FNV-1a of the full name keeps different long names apart.
    let mut h: u32 = 0x811c_9dc5;
    for b in name.as_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    let mut out = prefix;
    out.push('~');
    for _ in 0..3 {
        out.push(HASH_CHARS[(h % 36) as usize] as char);
        h /= 36;
    }
    let ext = clean(&ext, 3);
    if !ext.is_empty() {
        out.push('.');
        out.push_str(&ext);
    }
    out
}

/// Whether `name` has the form [`short_name`] gives a long name
/// (`STEM~XYZ.EXT`: a stem of 1 to 4 characters, `~`, three of
/// [`HASH_CHARS`], an extension of up to 3), which a lookup that found
/// nothing else may resolve through [`matches`]. Other names with a `~`
/// (Word's `~WRL0001.TMP`) are not looked for so.
pub fn is_hashed(name: &str) -> bool {
    let upper = name.to_uppercase();
    if !is_83(&upper) {
        return false;
    }
    let stem = upper.rsplit_once('.').map_or(upper.as_str(), |(s, _)| s);
    let Some((prefix, hash)) = stem.split_at_checked(stem.len().saturating_sub(4)) else {
        return false;
    };
    let hash = hash.as_bytes();
    (1..=4).contains(&prefix.len())
        && hash.len() == 4
        && hash[0] == b'~'
        && hash[1..].iter().all(|c| HASH_CHARS.contains(c))
}

/// Whether `short`, a name of the hashed form, is the short name of the
/// entry `long` (case aside), whose own name is not 8.3.
pub fn matches(short: &str, long: &str) -> bool {
    let of_long = short_name(long);
    of_long.contains('~') && of_long != long.to_uppercase() && of_long.eq_ignore_ascii_case(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(short_name("README.TXT"), "README.TXT");
        let s = short_name("big file.binary");
        assert!(s.starts_with("BIGF~") && s.ends_with(".BIN"), "{s}");
        assert!(s.len() <= 12);
        assert_ne!(
            short_name("longfilename1.txt"),
            short_name("longfilename2.txt")
        );
        assert_eq!(short_name("x.txt"), short_name("x.txt"));
        assert_eq!(short_name("b.bin"), "B.BIN");
        assert!(
            short_name(".hidden").starts_with("_~") || short_name(".hidden").starts_with("HIDD")
        );
    }

    #[test]
    fn short_names_lead_to_their_long_names() {
        let long = "AgEtxb5Vfj.n7y";
        let short = short_name(long);
        assert!(is_hashed(&short), "{short}");
        assert!(matches(&short, long));
        assert!(matches(&short.to_lowercase(), long));
        assert!(!matches(&short, "other long name.n7y"));
        // An 8.3 name is its own short name, found by the name itself.
        assert!(!is_hashed("README.TXT"));
        assert!(!is_hashed("A~1.TXT"));
        assert!(!is_hashed("~WRL0001.TMP"));
        assert!(is_hashed("AH~S~GDX.R2N"));
        assert!(is_hashed("_~0AZ"));
        assert!(!matches("ABCD~123.TXT", "abcd~123.txt"));
        // Every short name made for a long one has the form.
        for long in [
            "big file.binary",
            ".hidden",
            "x y z",
            "Ah~s.z27.R2n",
            "2CP5El.-i1T56Nz.n",
        ] {
            assert!(is_hashed(&short_name(long)), "{long}");
        }
    }
}
