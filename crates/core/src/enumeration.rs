//! A directory enumeration on one open (QUERY_DIRECTORY): its pattern, the
//! names the directory held when it began, and how far it has got.
//!
//! Only names are kept, packed, and each entry is looked at when it is
//! returned: a query for one name in a large folder looks at one entry,
//! and an open enumeration costs a few bytes a name. The names may even be
//! dropped to bound a connection's memory: the enumeration then lists the
//! directory again when it goes on, and finds its place by name (the
//! listing is sorted).

use copyless_vfs::FileStat;

use crate::wildcard::Pattern;

pub struct Enumeration {
    pub pattern: Pattern,
    /// "." and ".." as they were when the enumeration began.
    pub dot: FileStat,
    pub dotdot: FileStat,
    /// None while dropped.
    listing: Option<Listing>,
    /// The position of the next entry: 0 and 1 are "." and "..", 2 + i
    /// the listing's name i.
    pub next: usize,
    /// While the listing is dropped: the last name returned, if any.
    resume_after: Option<String>,
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
    pub fn new(pattern: Pattern, dot: FileStat, dotdot: FileStat, names: Vec<String>) -> Self {
        Enumeration {
            pattern,
            dot,
            dotdot,
            listing: Some(Listing::new(names)),
            next: 0,
            resume_after: None,
        }
    }

    pub fn has_listing(&self) -> bool {
        self.listing.is_some()
    }

    /// Bytes the listing holds (0 while dropped).
    pub fn listing_bytes(&self) -> usize {
        self.listing.as_ref().map_or(0, Listing::bytes)
    }

    /// Drops the listing, remembering the place.
    pub fn drop_listing(&mut self) {
        if let Some(listing) = self.listing.take() {
            if self.next > 2 {
                self.resume_after = Some(listing.name(self.next - 3).to_owned());
            }
        }
    }

    /// Takes a fresh listing after [`Enumeration::drop_listing`] and goes
    /// on after the last name returned.
    pub fn restore(&mut self, names: Vec<String>) {
        let listing = Listing::new(names);
        if let Some(after) = self.resume_after.take() {
            self.next = 2 + listing.after(&after);
        }
        self.listing = Some(listing);
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

/// Sorted names, packed into one string.
struct Listing {
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<u32>,
}

impl Listing {
    fn new(mut names: Vec<String>) -> Listing {
        names.sort_unstable();
        let mut text = String::with_capacity(names.iter().map(String::len).sum());
        let mut ends = Vec::with_capacity(names.len());
        for n in &names {
            text.push_str(n);
            // Names are at most 255 UTF-16 units; a directory would need
            // millions of them to pass 4 GiB. Saturating keeps any that
            // did from reading out of bounds.
            ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
        }
        Listing { text, ends }
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn name(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        self.text
            .get(start..self.ends[i] as usize)
            .unwrap_or_default()
    }

    fn bytes(&self) -> usize {
        self.text.capacity() + self.ends.capacity() * 4
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

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn enumeration(list: &[&str]) -> Enumeration {
        let pattern = Pattern::new("*").unwrap();
        Enumeration::new(
            pattern,
            FileStat::default(),
            FileStat::default(),
            names(list),
        )
    }

    fn name_at(e: &Enumeration, p: usize) -> &str {
        match e.at(p) {
            Entry::Name(n) => n,
            dots => dots.name(),
        }
    }

    #[test]
    fn sorted_and_packed() {
        let e = enumeration(&["b", "a", "ccc"]);
        assert_eq!(e.len(), 5);
        let all: Vec<&str> = (0..e.len()).map(|p| name_at(&e, p)).collect();
        assert_eq!(all, [".", "..", "a", "b", "ccc"]);
        assert!(e.listing_bytes() >= 5 + 3 * 4);
    }

    #[test]
    fn a_dropped_listing_goes_on_after_the_last_name() {
        let mut e = enumeration(&["a", "b", "c", "d"]);
        e.next = 4; // ".", "..", "a", "b" returned
        e.drop_listing();
        assert!(!e.has_listing());
        assert_eq!(e.listing_bytes(), 0);
        // "b" was deleted and "bb" made meanwhile.
        e.restore(names(&["a", "bb", "c", "d"]));
        assert_eq!(name_at(&e, e.next), "bb");
        // Dropped before any name was returned: the place is kept as is.
        let mut e = enumeration(&["a"]);
        e.next = 1;
        e.drop_listing();
        e.restore(names(&["a"]));
        assert_eq!(e.next, 1);
    }
}
