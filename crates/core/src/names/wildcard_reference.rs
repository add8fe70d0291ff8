//! A second, deliberately plain reading of MS-FSA 2.1.4.4
//! (FsRtlIsNameInExpression) to check [`crate::names::wildcard`] against: the
//! rules written as a recursion over (pattern position, name position),
//! memoised. It may recurse as deep as pattern plus name, so it is built
//! only for tests and for the fuzz targets (feature `reference`), never
//! into the server, and callers keep both short.

use std::collections::HashMap;

/// Whether `name` matches `pattern`, case-insensitively.
pub fn matches(pattern: &str, name: &str) -> bool {
    if matches!(pattern, "" | "*" | "*.*") {
        return true;
    }
    let p: Vec<char> = pattern.chars().map(fold).collect();
    let n: Vec<char> = name.chars().collect();
    let last_dot = n.iter().rposition(|&c| c == '.');
    let mut search = Search {
        p: &p,
        n: &n,
        last_dot,
        memo: HashMap::new(),
    };
    search.at(0, 0)
}

struct Search<'a> {
    p: &'a [char],
    n: &'a [char],
    last_dot: Option<usize>,
    memo: HashMap<(usize, usize), bool>,
}

impl Search<'_> {
    fn at(&mut self, i: usize, j: usize) -> bool {
        if let Some(&known) = self.memo.get(&(i, j)) {
            return known;
        }
        let result = self.step(i, j);
        self.memo.insert((i, j), result);
        result
    }

    fn step(&mut self, i: usize, j: usize) -> bool {
        let Some(&pc) = self.p.get(i) else {
            return j == self.n.len();
        };
        let c = self.n.get(j).copied();
        match pc {
            // Zero or more characters.
            '*' => self.at(i + 1, j) || (c.is_some() && self.at(i, j + 1)),
            // DOS_STAR: zero or more characters, but never the name's last
            // period.
            '<' => {
                self.at(i + 1, j) || (c.is_some() && Some(j) != self.last_dot && self.at(i, j + 1))
            }
            // Exactly one character.
            '?' => c.is_some() && self.at(i + 1, j + 1),
            // DOS_QM: one character, or none at a period or the end.
            '>' => match c {
                None | Some('.') => self.at(i + 1, j),
                Some(_) => self.at(i + 1, j + 1),
            },
            // DOS_DOT: a period, or nothing past the end of the name.
            '"' => match c {
                None => self.at(i + 1, j),
                Some('.') => self.at(i + 1, j + 1),
                Some(_) => false,
            },
            lit => c.is_some_and(|c| fold(c) == lit) && self.at(i + 1, j + 1),
        }
    }
}

/// Lower case when it is one character; other characters compare as they
/// are (as the server folds).
fn fold(c: char) -> char {
    let mut lower = c.to_lowercase();
    match (lower.next(), lower.next()) {
        (Some(l), None) => l,
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn the_documented_cases() {
        assert!(matches("*.txt", "A.TXT"));
        assert!(!matches("*.txt", "a.txt.bak"));
        assert!(matches("<.txt", "a.b.txt"));
        assert!(!matches("<", "a.b"));
        assert!(matches("a>>>", "a"));
        assert!(matches("a>>.b", "a.b"));
        assert!(matches("a\"", "a"));
        assert!(matches("a\"b", "a.b"));
        assert!(!matches("a?", "a"));
    }
}
