//! DOS wildcard matching as Windows does it (MS-FSA 2.1.4.4,
//! FsRtlIsNameInExpression): `*`, `?`, and the DOS forms `<` (DOS_STAR),
//! `>` (DOS_QM) and `"` (DOS_DOT). Case-insensitive.
//!
//! The pattern comes from the client, so it must not choose how deep we
//! recurse or how much we allocate. Like Windows, we run the pattern as a
//! nondeterministic automaton over the name: the set of pattern positions
//! reached so far, advanced one name character at a time. Patterns are at
//! most [`MAX_PATTERN_UNITS`] long, so the set is a fixed 256-bit set:
//! no recursion, no allocation per name, and at most pattern x name steps.

/// The longest pattern, in UTF-16 units: a pattern must be a valid file
/// name component (MS-FSA 2.1.5.6.3, MS-FSCC 2.1.5), and a longer one gets
/// STATUS_OBJECT_NAME_INVALID.
pub const MAX_PATTERN_UNITS: usize = 255;

pub fn is_wild(pattern: &str) -> bool {
    pattern.contains(['*', '?', '<', '>', '"'])
}

/// A search pattern, checked and case-folded once per query.
#[derive(Debug, Clone)]
pub struct Pattern {
    chars: Vec<char>,
    /// `*`, `*.*` and the empty pattern match every name.
    all: bool,
}

/// Pattern positions 0..=MAX_PATTERN_UNITS: "the pattern up to here has
/// matched the name so far".
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct States([u64; 4]);

impl States {
    fn has(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }

    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
}

impl Pattern {
    /// None when the pattern is longer than [`MAX_PATTERN_UNITS`]
    /// characters.
    pub fn new(pattern: &str) -> Option<Pattern> {
        let chars: Vec<char> = pattern.chars().map(fold).collect();
        if chars.len() > MAX_PATTERN_UNITS {
            return None;
        }
        let all = matches!(pattern, "" | "*" | "*.*");
        Some(Pattern { chars, all })
    }

    pub fn matches(&self, name: &str) -> bool {
        if self.all {
            return true;
        }
        let p = &self.chars;
        let end = p.len();
        // DOS_STAR may take any character but the name's last period.
        let last_dot = name.rfind('.');
        let mut chars = name.char_indices();
        let mut now = States::default();
        now.set(0);
        loop {
            let next_char = chars.next();
            let c = next_char.map(|(_, c)| c);
            // Moves that take no character, in pattern order so that a
            // run of them is followed in one pass.
            for (i, &pc) in p.iter().enumerate() {
                if now.has(i) && matches_nothing(pc, c) {
                    now.set(i + 1);
                }
            }
            let Some((at, c)) = next_char else {
                return now.has(end);
            };
            let folded = fold(c);
            let mut next = States::default();
            for (i, &pc) in p.iter().enumerate() {
                if !now.has(i) {
                    continue;
                }
                match pc {
                    '*' => next.set(i),
                    '<' if c != '.' || Some(at) != last_dot => next.set(i),
                    '<' => {}
                    '>' if c != '.' => next.set(i + 1),
                    '"' if c == '.' => next.set(i + 1),
                    '?' => next.set(i + 1),
                    '>' | '"' => {}
                    lit if lit == folded => next.set(i + 1),
                    _ => {}
                }
            }
            if next.is_empty() {
                return false;
            }
            now = next;
        }
    }
}

/// Whether pattern character `pc` may match no character when the name
/// goes on with `c` (None: the name has ended).
fn matches_nothing(pc: char, c: Option<char>) -> bool {
    match pc {
        '*' | '<' => true,
        // DOS_QM: at a period or the end, the rest of a run of them is
        // skipped.
        '>' => matches!(c, None | Some('.')),
        // DOS_DOT: a period, or nothing past the end of the name.
        '"' => c.is_none(),
        _ => false,
    }
}

/// Case folding one character to one character (the rare characters whose
/// lower case is longer compare as they are).
fn fold(c: char) -> char {
    if c.is_ascii() {
        return c.to_ascii_lowercase();
    }
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

/// One-off match of a pattern against a name; a pattern too long to be a
/// name matches nothing.
pub fn matches(pattern: &str, name: &str) -> bool {
    Pattern::new(pattern).is_some_and(|p| p.matches(name))
}

#[cfg(test)]
mod tests {
    use super::{matches, Pattern, MAX_PATTERN_UNITS};

    #[test]
    fn dos_wildcards() {
        assert!(matches("*", "anything"));
        assert!(matches("*.*", "noext"));
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
        assert!(matches("*ä*", "XÄY"));
        // DOS_STAR stops at the last period, but a star before it may
        // carry it past that period.
        assert!(!matches("<", "a.b"));
        assert!(matches("*<x", "a.bx"));
        assert!(matches("F0_<\"*", "F0_001.txt"));
        assert!(matches("F0_<\"*", "F0_"));
        assert!(!matches("a<b.exe", "a.bcd.exe"));
        assert!(matches("ab<exe", "abcdexe"));
        assert!(matches("a>c.exe", "abc.exe"));
        assert!(!matches("a>c.exe", "ac.exe"));
        assert!(!matches("a>>>exe", "abc.exe"));
        assert!(matches("ntoskrnl.exe\"", "ntoskrnl.exe"));
        assert!(!matches("\"ntoskrnl.exe", "ntoskrnl.exe"));
        assert!(matches("*.*.*.*", "127.0.0.1"));
    }

    /// What MS-FSA 2.1.4.4 says, as plainly as possible: try every way
    /// each wildcard can match, by memoised recursion. Deep and slow, so
    /// only for checking the automaton on small cases.
    fn reference(pattern: &str, name: &str) -> bool {
        fn m(p: &[char], n: &[char], pi: usize, ni: usize, memo: &mut [Option<bool>]) -> bool {
            let key = pi * (n.len() + 1) + ni;
            if let Some(v) = memo[key] {
                return v;
            }
            let last_dot = n.iter().rposition(|c| *c == '.');
            let at = n.get(ni).copied();
            let r = match p.get(pi) {
                None => at.is_none(),
                Some('*') => {
                    m(p, n, pi + 1, ni, memo) || (at.is_some() && m(p, n, pi, ni + 1, memo))
                }
                Some('<') => {
                    let may_take = at.is_some() && !(at == Some('.') && Some(ni) == last_dot);
                    m(p, n, pi + 1, ni, memo) || (may_take && m(p, n, pi, ni + 1, memo))
                }
                Some('>') => match at {
                    None | Some('.') => m(p, n, pi + 1, ni, memo),
                    Some(_) => m(p, n, pi + 1, ni + 1, memo),
                },
                Some('"') => match at {
                    None => m(p, n, pi + 1, ni, memo),
                    Some('.') => m(p, n, pi + 1, ni + 1, memo),
                    Some(_) => false,
                },
                Some('?') => at.is_some() && m(p, n, pi + 1, ni + 1, memo),
                Some(c) => at == Some(*c) && m(p, n, pi + 1, ni + 1, memo),
            };
            memo[key] = Some(r);
            r
        }
        if matches!(pattern, "" | "*" | "*.*") {
            return true;
        }
        let p: Vec<char> = pattern.chars().flat_map(char::to_lowercase).collect();
        let n: Vec<char> = name.chars().flat_map(char::to_lowercase).collect();
        let mut memo = vec![None; (p.len() + 1) * (n.len() + 1)];
        m(&p, &n, 0, 0, &mut memo)
    }

    /// Every string of up to `max` characters drawn from `alphabet`.
    fn strings(alphabet: &[char], max: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut last = vec![String::new()];
        for _ in 0..max {
            last = last
                .iter()
                .flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}")))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn agrees_with_the_reference_on_every_small_case() {
        // Every pattern of up to 4 against every name of up to 6, and the
        // longer patterns against shorter names: a few seconds in all.
        let alphabet = ['a', 'B', '.', '*', '?', '<', '>', '"'];
        for (pattern_len, name_len) in [(4, 6), (5, 4)] {
            let names = strings(&['A', 'b', '.'], name_len);
            for p in strings(&alphabet, pattern_len) {
                let compiled = Pattern::new(&p).unwrap();
                for n in names.iter().filter(|n| !n.is_empty()) {
                    assert_eq!(
                        compiled.matches(n),
                        reference(&p, n),
                        "pattern {p:?} name {n:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn hostile_patterns_are_refused_or_finish() {
        // The pattern that overflowed the stack of the recursive matcher.
        assert!(Pattern::new(&"*".repeat(12_000)).is_none());
        assert!(!matches(&"*".repeat(12_000), "name.txt"));
        let longest = "*<>?\"a".repeat(MAX_PATTERN_UNITS / 6);
        let name = "a".repeat(255);
        assert!(!Pattern::new(&longest).unwrap().matches(&name));
        let mut many_stars = "a*".repeat(MAX_PATTERN_UNITS / 2);
        many_stars.push('b');
        assert!(!Pattern::new(&many_stars).unwrap().matches(&name));
        assert!(Pattern::new(&"<".repeat(MAX_PATTERN_UNITS))
            .unwrap()
            .matches(&name));
    }
}
