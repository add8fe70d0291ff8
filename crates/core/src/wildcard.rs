//! DOS wildcard matching as Windows does it (MS-FSA 2.1.4.4,
//! FsRtlIsNameInExpression): `*`, `?`, and the DOS forms `<` (DOS_STAR),
//! `>` (DOS_QM) and `"` (DOS_DOT). Case-insensitive.

pub fn is_wild(pattern: &str) -> bool {
    pattern.contains(['*', '?', '<', '>', '"'])
}

pub fn matches(pattern: &str, name: &str) -> bool {
    if pattern == "*" || pattern.is_empty() {
        return true;
    }
    let p: Vec<char> = pattern.chars().flat_map(char::to_lowercase).collect();
    let n: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
    let mut memo = vec![None; (p.len() + 1) * (n.len() + 1)];
    m(&p, &n, 0, 0, &mut memo)
}

fn m(p: &[char], n: &[char], pi: usize, ni: usize, memo: &mut [Option<bool>]) -> bool {
    let key = pi * (n.len() + 1) + ni;
    if let Some(v) = memo[key] {
        return v;
    }
    let r = if pi == p.len() {
        ni == n.len()
    } else {
        match p[pi] {
            '*' => (ni..=n.len()).any(|k| m(p, n, pi + 1, k, memo)),
            '?' => ni < n.len() && m(p, n, pi + 1, ni + 1, memo),
            '<' => {
                // Zero or more characters, not past the last '.' of the name.
                let last_dot = n.iter().rposition(|c| *c == '.');
                (ni..=n.len()).any(|k| {
                    let within = match last_dot {
                        Some(d) => k <= d,
                        None => true,
                    };
                    within && m(p, n, pi + 1, k, memo)
                })
            }
            '>' => {
                if ni < n.len() && n[ni] != '.' {
                    m(p, n, pi + 1, ni + 1, memo)
                } else {
                    // At a '.' or the end: the rest of the DOS_QMs match nothing.
                    m(p, n, pi + 1, ni, memo)
                }
            }
            '"' => {
                if ni < n.len() && n[ni] == '.' {
                    m(p, n, pi + 1, ni + 1, memo)
                } else {
                    ni == n.len() && m(p, n, pi + 1, ni, memo)
                }
            }
            c => ni < n.len() && n[ni] == c && m(p, n, pi + 1, ni + 1, memo),
        }
    };
    memo[key] = Some(r);
    r
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn dos_wildcards() {
        assert!(matches("*", "anything"));
        assert!(matches("*.txt", "A.TXT"));
        assert!(!matches("*.txt", "a.txt.bak"));
        assert!(matches("a?c", "abc"));
        assert!(!matches("a?c", "ac"));
        assert!(matches("<.txt", "file.txt"));
        assert!(matches("file>>>>.txt", "file.txt"));
        assert!(matches("file\"txt", "file.txt"));
        assert!(matches("file\"*", "file"));
        assert!(matches("<", "noext"));
        assert!(matches("Exact.Name", "exact.name"));
        assert!(!matches("exact", "exact2"));
    }
}
