//! A distribution drawn the way SystemTap's `@hist_log` draws it: one row
//! per power of two, a bar of `@` and the count.

use std::fmt::Write;

use crate::snapshot::Buckets;

const BAR: usize = 50;

/// Power-of-two rows of a histogram of nanoseconds, in microseconds: row 0
/// holds values under 1 us, row k values from 2^(k-1) to 2^k - 1 us.
fn log2_rows(b: &Buckets) -> Vec<u64> {
    let mut rows = Vec::new();
    for &(ns, count) in &b.0 {
        let us = ns / 1_000;
        let row = if us == 0 {
            0
        } else {
            64 - us.leading_zeros() as usize
        };
        if rows.len() <= row {
            rows.resize(row + 1, 0);
        }
        if let Some(r) = rows.get_mut(row) {
            *r += count;
        }
    }
    rows
}

fn row_label(row: usize) -> u64 {
    if row == 0 {
        0
    } else {
        1u64 << (row - 1)
    }
}

/// Draws `b` (nanoseconds) with a title line; an empty histogram says so.
pub fn render(title: &str, b: &Buckets) -> String {
    let rows = log2_rows(b);
    let mut o = String::new();
    let total = b.count();
    let _ = writeln!(o, "{title}: {total} samples, value in microseconds");
    let Some(first) = rows.iter().position(|&c| c > 0) else {
        let _ = writeln!(o, "(no samples)");
        return o;
    };
    let last = rows.iter().rposition(|&c| c > 0).unwrap_or(first);
    // One empty row either side, as SystemTap shows.
    let from = first.saturating_sub(1);
    let to = last + 1;
    let peak = rows.iter().copied().max().unwrap_or(1).max(1);
    let width = row_label(to).to_string().len().max(5);
    let _ = writeln!(o, "{:>width$} |{} count", "value", "-".repeat(BAR));
    for row in from..=to {
        let count = rows.get(row).copied().unwrap_or(0);
        let mut len = (count as u128 * BAR as u128 / peak as u128) as usize;
        if count > 0 {
            len = len.max(1);
        }
        let _ = writeln!(
            o,
            "{:>width$} |{:<BAR$} {count}",
            row_label(row),
            "@".repeat(len)
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_power_of_two_rows() {
        // 10 under 1 us, 30 at 5 us (row 4..8), 15 at 100 us (64..128).
        let b = Buckets(vec![(500, 10), (5_000, 30), (100_000, 15)]);
        let text = render("WRITE", &b);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "WRITE: 55 samples, value in microseconds");
        assert!(lines[1].starts_with("value |-----"), "{}", lines[1]);
        let row = |label: &str| {
            lines
                .iter()
                .find(|l| l.split('|').next().unwrap().trim() == label)
                .copied()
                .unwrap_or_else(|| panic!("no row {label} in\n{text}"))
        };
        assert!(row("0").ends_with(" 10"));
        let four = row("4");
        assert!(four.contains(&"@".repeat(50)), "{four}");
        assert!(four.ends_with(" 30"));
        assert!(row("64").contains(&format!("{} ", "@".repeat(25))));
        // Empty rows between and one after the last.
        assert!(row("8").ends_with(" 0"));
        assert!(row("128").ends_with(" 0"));
        assert!(!text.contains("\n  256 |"));
    }

    #[test]
    fn empty_histogram() {
        let text = render("READ", &Buckets::default());
        assert!(text.contains("(no samples)"));
    }
}
