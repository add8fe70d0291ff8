//! DOS wildcard matching as Windows does it (MS-FSA 2.1.4.4,
//! FsRtlIsNameInExpression): `*`, `?`, and the DOS forms `<` (DOS_STAR),
//! `>` (DOS_QM) and `"` (DOS_DOT). Case-insensitive.
//!
//! The pattern comes from the client, so it must not choose how deep we
//! recurse, how much we allocate per name, or how long a name takes. Like
//! Windows, we run the pattern as a nondeterministic automaton over the
//! name: the set of pattern positions reached so far, advanced one name
//! character at a time. Patterns are at most [`MAX_PATTERN_UNITS`] long, so
//! the set fits 256 bits, and each character advances every position at
//! once with a few word operations (shift-and, as in bitap): no recursion,
//! no allocation per name, and time linear in the name's length.

/// The longest pattern, in UTF-16 units: a pattern must be a valid file
/// name component (MS-FSA 2.1.5.6.3, MS-FSCC 2.1.5), and a longer one gets
/// STATUS_OBJECT_NAME_INVALID.
pub const MAX_PATTERN_UNITS: usize = 255;

pub fn is_wild(pattern: &str) -> bool {
    pattern.contains(['*', '?', '<', '>', '"'])
}

/// Pattern positions 0..=MAX_PATTERN_UNITS, bit i for "the pattern up to
/// position i has matched the name so far", or a set of positions with
/// some property.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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

    fn and(self, o: States) -> States {
        States(std::array::from_fn(|w| self.0[w] & o.0[w]))
    }

    fn or(self, o: States) -> States {
        States(std::array::from_fn(|w| self.0[w] | o.0[w]))
    }

    fn xor(self, o: States) -> States {
        States(std::array::from_fn(|w| self.0[w] ^ o.0[w]))
    }

    /// Every position moved on by one (the top bit cannot be set: no
    /// pattern position reaches past MAX_PATTERN_UNITS).
    fn next_positions(self) -> States {
        let mut out = [0u64; 4];
        let mut carry = 0;
        for (o, w) in out.iter_mut().zip(self.0) {
            *o = (w << 1) | carry;
            carry = w >> 63;
        }
        States(out)
    }

    /// 256-bit addition (the sum never carries out of the top word: see
    /// [`States::closure`]).
    fn add(self, o: States) -> States {
        let mut out = [0u64; 4];
        let mut carry = false;
        for ((r, a), b) in out.iter_mut().zip(self.0).zip(o.0) {
            let (s1, c1) = a.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *r = s2;
            carry = c1 || c2;
        }
        States(out)
    }

    /// These states and every one reachable from them through positions
    /// of `skippable` (wildcards that may match nothing), in one pass:
    /// within each run of skippable positions, adding the live ones to the
    /// run carries from the first live position to just past the run.
    fn closure(self, skippable: States) -> States {
        let live = self.and(skippable);
        let reached = skippable.add(live).xor(skippable).or(live);
        self.or(reached)
    }
}

/// A search pattern, checked, case-folded and compiled once per query.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// `*`, `*.*` and the empty pattern match every name.
    all: bool,
    /// The position just past the pattern: reaching it is a match.
    end: usize,
    /// Boxed: an open keeps its enumeration's pattern.
    sets: Box<Sets>,
}

/// The positions of each kind of pattern character.
#[derive(Debug, Clone)]
struct Sets {
    /// Wildcards that take any character and stay (`*`).
    star: States,
    /// `<`: as `*`, but never the name's last period.
    dos_star: States,
    /// `?`: any one character.
    any: States,
    /// `>`: one character other than a period.
    dos_qm: States,
    /// `"`: a period.
    dos_dot: States,
    /// Wildcards that may match nothing before a character other than a
    /// period, before a period, and at the end of the name.
    skip_before_char: States,
    skip_before_dot: States,
    skip_at_end: States,
    /// Each ASCII literal (folded), and the others.
    ascii: [States; 128],
    other: Vec<(char, States)>,
}

impl Pattern {
    /// None when the pattern is longer than [`MAX_PATTERN_UNITS`]
    /// characters.
    pub fn new(pattern: &str) -> Option<Pattern> {
        let chars: Vec<char> = pattern.chars().map(fold).collect();
        if chars.len() > MAX_PATTERN_UNITS {
            return None;
        }
        let mut p = Sets {
            star: States::default(),
            dos_star: States::default(),
            any: States::default(),
            dos_qm: States::default(),
            dos_dot: States::default(),
            skip_before_char: States::default(),
            skip_before_dot: States::default(),
            skip_at_end: States::default(),
            ascii: [States::default(); 128],
            other: Vec::new(),
        };
        for (i, &c) in chars.iter().enumerate() {
            match c {
                '*' => p.star.set(i),
                '<' => p.dos_star.set(i),
                '?' => p.any.set(i),
                '>' => p.dos_qm.set(i),
                '"' => p.dos_dot.set(i),
                c if c.is_ascii() => p.ascii[c as usize].set(i),
                c => match p.other.iter_mut().find(|(o, _)| *o == c) {
                    Some((_, at)) => at.set(i),
                    None => {
                        let mut at = States::default();
                        at.set(i);
                        p.other.push((c, at));
                    }
                },
            }
        }
        p.other.sort_unstable_by_key(|(c, _)| *c);
        // DOS_QM matches nothing at a period or the end (the rest of a run
        // of them is skipped); DOS_DOT matches nothing only past the end.
        p.skip_before_char = p.star.or(p.dos_star);
        p.skip_before_dot = p.skip_before_char.or(p.dos_qm);
        p.skip_at_end = p.skip_before_dot.or(p.dos_dot);
        Some(Pattern {
            all: matches!(pattern, "" | "*" | "*.*"),
            end: chars.len(),
            sets: Box::new(p),
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        if self.all {
            return true;
        }
        let p = &self.sets;
        let last_dot = name.rfind('.');
        let mut now = States::default();
        now.set(0);
        for (at, c) in name.char_indices() {
            let is_dot = c == '.';
            now = now.closure(if is_dot {
                p.skip_before_dot
            } else {
                p.skip_before_char
            });
            let mut takes_one = p.any.or(p.literal(fold(c)));
            let mut stays = p.star;
            if is_dot {
                takes_one = takes_one.or(p.dos_dot);
            } else {
                takes_one = takes_one.or(p.dos_qm);
            }
            if !(is_dot && Some(at) == last_dot) {
                stays = stays.or(p.dos_star);
            }
            now = now.and(stays).or(now.and(takes_one).next_positions());
            if now.is_empty() {
                return false;
            }
        }
        now.closure(p.skip_at_end).has(self.end)
    }
}

impl Sets {
    /// The positions of literal `c` (already folded).
    fn literal(&self, c: char) -> States {
        if c.is_ascii() {
            return self.ascii[c as usize];
        }
        match self.other.binary_search_by_key(&c, |(o, _)| *o) {
            Ok(i) => self.other[i].1,
            Err(_) => States::default(),
        }
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
                        crate::names::wildcard_reference::matches(&p, n),
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
