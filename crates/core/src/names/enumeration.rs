//! A directory enumeration on one open (QUERY_DIRECTORY): its pattern, the
//! names of the directory it lists, and how far it has got.
//!
//! Only names are kept, packed, and each entry is looked at when it is
//! returned: a query for one name in a large folder looks at one entry,
//! and an open enumeration costs a few bytes a name. A listing holds the
//! names that match the pattern, sorted, each charged to the user in the
//! server's ledger (listing_ledger.rs). When the room left is smaller than
//! the directory, a listing is a window: the smallest names after the
//! place reached that fit, and the directory is read again for the next
//! window when the enumeration gets there. A listing may also be dropped
//! to bound memory: the enumeration then reads the directory again when it
//! goes on, and finds its place by name (listings are sorted).

use copyless_vfs::FileStat;

use crate::listing_ledger::ListingCharge;
use crate::names::wildcard::Pattern;

pub struct Enumeration {
    pub pattern: Pattern,
    /// "." and ".." as they were when the enumeration began.
    pub dot: FileStat,
    pub dotdot: FileStat,
    /// None until taken, and while dropped.
    listing: Option<Listing>,
    /// The position of the next entry: 0 and 1 are "." and "..", 2 + i
    /// the listing's name i.
    pub next: usize,
    /// While the listing is dropped: the last name returned, if any.
    resume_after: Option<String>,
    /// Every name was returned: the listing is gone, and only a restart
    /// lists again.
    ended: bool,
}

/// What is at a position of an enumeration.
pub enum Entry<'a> {
    Dot,
    DotDot,
    Name(&'a str),
}

impl<'a> Entry<'a> {
    pub fn name(&self) -> &'a str {
        match self {
            Entry::Dot => ".",
            Entry::DotDot => "..",
            Entry::Name(n) => n,
        }
    }
}

impl Enumeration {
    /// An enumeration that has not listed its directory yet.
    pub fn new(pattern: Pattern, dot: FileStat, dotdot: FileStat) -> Self {
        Enumeration {
            pattern,
            dot,
            dotdot,
            listing: None,
            next: 0,
            resume_after: None,
            ended: false,
        }
    }

    /// Whether the directory is to be listed before the enumeration can
    /// go on.
    pub fn needs_listing(&self) -> bool {
        self.listing.is_none() && !self.ended
    }

    /// Once a listing of the whole rest of the directory has been gone
    /// through, it is of no more use: it goes back to the ledger, and the
    /// enumeration stays at its end.
    pub fn end_if_done(&mut self) {
        if self
            .listing
            .as_ref()
            .is_some_and(|l| !l.partial && self.next >= 2 + l.len())
        {
            self.listing = None;
            self.ended = true;
        }
    }

    pub fn has_listing(&self) -> bool {
        self.listing.is_some()
    }

    /// Bytes the listing holds (0 while dropped).
    pub fn listing_bytes(&self) -> usize {
        self.listing.as_ref().map_or(0, |l| l.charge.bytes())
    }

    /// The user the listing is charged to (folded), if it has one.
    pub fn listing_user(&self) -> Option<&str> {
        self.listing.as_ref().map(|l| l.charge.user())
    }

    /// Drops the listing, remembering the place; its bytes go back to
    /// the ledger.
    pub fn drop_listing(&mut self) {
        if let Some(listing) = self.listing.take() {
            if self.next > 2 {
                self.resume_after = Some(listing.name(self.next - 3).to_owned());
            }
        }
    }

    /// A window for the next listing: the names after the last one
    /// returned, within `budget` bytes.
    pub fn window(&self, budget: usize) -> Window<'_> {
        Window {
            pattern: &self.pattern,
            after: self.resume_after.as_deref(),
            budget,
            buf: String::new(),
            spans: Vec::new(),
            bytes: 0,
            cut: None,
        }
    }

    /// Takes the listing `window` gathered, charged with `charge` (whose
    /// bytes are [`Window::bytes`]), and goes on after the last name
    /// returned.
    pub fn take(&mut self, window: Taken, charge: ListingCharge) {
        let listing = Listing {
            text: window.text,
            ends: window.ends,
            partial: window.partial,
            charge,
        };
        if let Some(after) = self.resume_after.take() {
            self.next = 2 + listing.after(&after);
        }
        self.listing = Some(listing);
    }

    /// Whether the positions ran out before the directory's names did:
    /// the next window is to be listed.
    pub fn window_done(&self) -> bool {
        self.listing
            .as_ref()
            .is_some_and(|l| l.partial && self.next >= 2 + l.len())
    }

    /// Positions in all: "." and "..", then the names.
    pub fn len(&self) -> usize {
        2 + self.listing.as_ref().map_or(0, Listing::len)
    }

    /// What is at `position` (below [`Enumeration::len`]).
    pub fn at(&self, position: usize) -> Entry<'_> {
        match position {
            0 => Entry::Dot,
            1 => Entry::DotDot,
            p => Entry::Name(
                self.listing
                    .as_ref()
                    .expect("positions past the dots need the listing")
                    .name(p - 2),
            ),
        }
    }
}

/// What a name costs in a listing: its bytes and where it ends.
fn cost(name: &str) -> usize {
    name.len() + 4
}

/// Picks, from a directory's names offered in any order, the smallest
/// ones after the place an enumeration reached that match its pattern,
/// within `budget` bytes (at least one): the names are read once, and
/// only those kept are held, in one buffer rather than one allocation a
/// name, so that a large directory read again and again leaves no litter
/// of small blocks behind in the allocator.
pub struct Window<'a> {
    pattern: &'a Pattern,
    after: Option<&'a str>,
    budget: usize,
    /// The names kept, one after the other.
    buf: String,
    /// Where each kept name starts in `buf`, and its length.
    spans: Vec<(usize, usize)>,
    bytes: usize,
    /// The smallest name left out for want of room: it and the names
    /// after it wait for a later window.
    cut: Option<String>,
}

/// What a window gathered: sorted names, packed.
pub struct Taken {
    text: String,
    ends: Vec<u32>,
    partial: bool,
}

impl Window<'_> {
    pub fn offer(&mut self, name: &str) {
        if self.after.is_some_and(|a| name <= a)
            || self.cut.as_deref().is_some_and(|c| name >= c)
            || !self.pattern.matches(name)
        {
            return;
        }
        self.spans.push((self.buf.len(), name.len()));
        self.buf.push_str(name);
        self.bytes += cost(name);
        if self.bytes > self.budget && self.spans.len() > 1 {
            self.shed();
        }
    }

    fn sort(&mut self) {
        let buf = &self.buf;
        self.spans
            .sort_unstable_by(|a, b| buf[a.0..a.0 + a.1].cmp(&buf[b.0..b.0 + b.1]));
    }

    /// Over budget: keeps the smallest names that fill half of it (at
    /// least one), and leaves the rest for a later window. Halving, not
    /// trimming to the brim, keeps the sorting to a few rounds however
    /// large the directory.
    fn shed(&mut self) {
        self.sort();
        let mut keep = 0;
        let mut bytes = 0;
        for &(_, len) in &self.spans {
            if keep > 0 && bytes + len + 4 > self.budget / 2 {
                break;
            }
            keep += 1;
            bytes += len + 4;
        }
        if let Some(&(start, len)) = self.spans.get(keep) {
            self.cut = Some(self.buf[start..start + len].to_owned());
        }
        let mut buf = String::with_capacity(self.budget.min(self.buf.len()));
        for span in &mut self.spans[..keep] {
            let start = buf.len();
            buf.push_str(&self.buf[span.0..span.0 + span.1]);
            span.0 = start;
        }
        self.spans.truncate(keep);
        self.buf = buf;
        self.bytes = bytes;
    }

    /// The bytes the listing made of it holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn finish(mut self) -> Taken {
        self.sort();
        let mut text = String::with_capacity(self.bytes - 4 * self.spans.len());
        let mut ends = Vec::with_capacity(self.spans.len());
        for &(start, len) in &self.spans {
            text.push_str(&self.buf[start..start + len]);
            // Names are at most 255 UTF-16 units; a directory would need
            // millions of them to pass 4 GiB. Saturating keeps any that
            // did from reading out of bounds.
            ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        }
        Taken {
            text,
            ends,
            partial: self.cut.is_some(),
        }
    }
}

/// Sorted names, packed into one string.
struct Listing {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<u32>,
    /// Names after the last are not in it: a window of a larger directory.
    partial: bool,
    charge: ListingCharge,
}

impl Listing {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn name(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text
            .get(start..self.ends[i] as usize)
            .unwrap_or_default()
    }

    /// The index of the first name after `name`.
    fn after(&self, name: &str) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.name(mid) <= name {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listing_ledger::ListingLedger;

    fn list(e: &mut Enumeration, dir: &[&str], budget: usize) {
        let ledger = ListingLedger::new();
        let mut w = e.window(budget);
        for n in dir {
            w.offer(n);
        }
        let charge = ledger.charge("alice", w.bytes());
        let taken = w.finish();
        e.take(taken, charge);
    }

    fn enumeration(pattern: &str) -> Enumeration {
        Enumeration::new(
            Pattern::new(pattern).unwrap(),
            FileStat::default(),
            FileStat::default(),
        )
    }

    fn name_at(e: &Enumeration, p: usize) -> &str {
        match e.at(p) {
            Entry::Name(n) => n,
            dots => dots.name(),
        }
    }

    /// Every name the enumeration returns from where it is, listing
    /// `dir` again whenever a window runs out.
    fn rest(e: &mut Enumeration, dir: &[&str], budget: usize) -> Vec<String> {
        let mut out = Vec::new();
        loop {
            if !e.has_listing() {
                list(e, dir, budget);
            }
            while e.next < e.len() {
                out.push(name_at(e, e.next).to_owned());
                e.next += 1;
            }
            if !e.window_done() {
                return out;
            }
            e.drop_listing();
        }
    }

    #[test]
    fn sorted_and_packed() {
        let mut e = enumeration("*");
        list(&mut e, &["b", "a", "ccc"], 1 << 20);
        assert_eq!(e.len(), 5);
        let all: Vec<&str> = (0..e.len()).map(|p| name_at(&e, p)).collect();
        assert_eq!(all, [".", "..", "a", "b", "ccc"]);
        assert_eq!(e.listing_bytes(), 5 + 3 * 4);
        assert!(!e.window_done());
    }

    #[test]
    fn a_dropped_listing_goes_on_after_the_last_name() {
        let mut e = enumeration("*");
        list(&mut e, &["a", "b", "c", "d"], 1 << 20);
        e.next = 4; // ".", "..", "a", "b" returned
        e.drop_listing();
        assert!(!e.has_listing());
        assert_eq!(e.listing_bytes(), 0);
        // "b" was deleted and "bb" made meanwhile.
        list(&mut e, &["a", "bb", "c", "d"], 1 << 20);
        assert_eq!(name_at(&e, e.next), "bb");
        // Dropped before any name was returned: the place is kept as is.
        let mut e = enumeration("*");
        list(&mut e, &["a"], 1 << 20);
        e.next = 1;
        e.drop_listing();
        list(&mut e, &["a"], 1 << 20);
        assert_eq!(e.next, 1);
    }

    #[test]
    fn windows_hold_what_the_budget_allows_and_go_on_in_order() {
        let dir = ["e", "c", "a", "f", "b", "d", "g"];
        let mut e = enumeration("*");
        // Room for two names of one byte and their ends.
        list(&mut e, &dir, 10);
        assert!(e.len() > 2 && e.listing_bytes() <= 10);
        e.next = 2;
        assert_eq!(rest(&mut e, &dir, 10), ["a", "b", "c", "d", "e", "f", "g"]);
        // A budget too small for one name still takes one.
        let mut e = enumeration("*");
        e.next = 2;
        assert_eq!(rest(&mut e, &dir, 0), ["a", "b", "c", "d", "e", "f", "g"]);
    }

    #[test]
    fn windows_of_a_large_directory_in_any_order_list_every_name_once() {
        let mut names: Vec<String> = (0..1000).map(|i| format!("name-{i:04}")).collect();
        // Neither sorted nor reversed: a fixed shuffle.
        names.sort_by_key(|n| {
            n.bytes()
                .map(u32::from)
                .fold(7u32, |h, b| h.wrapping_mul(31) ^ b)
        });
        let dir: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut e = enumeration("*");
        e.next = 2;
        let got = rest(&mut e, &dir, 300);
        names.sort();
        assert_eq!(got, names);
    }

    #[test]
    fn windows_keep_only_what_the_pattern_matches() {
        let dir = ["x1", "a.txt", "x2", "b.txt", "x3", "c.txt"];
        let mut e = enumeration("*.txt");
        e.next = 2;
        assert_eq!(rest(&mut e, &dir, 9), ["a.txt", "b.txt", "c.txt"]);
        let mut e = enumeration("*.txt");
        list(&mut e, &dir, 1 << 20);
        assert_eq!(e.len(), 5, "names the pattern leaves out are not kept");
    }
}
