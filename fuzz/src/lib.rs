//! Harnesses behind the fuzz targets in `fuzz_targets/`. Each target is a
//! thin `fuzz_target!` around a function here, so the input formats, the
//! checks and the seed tool (`fuzz/seeds/capture.py`) agree in one place.
//! See docs/FUZZING.md.

pub mod auth;
pub mod connection;
pub mod parsers;
pub mod rpc;
pub mod wsd;

/// Splits an input into records, each a little-endian u16 length and that
/// many bytes. A record cut short by the end of the input keeps what is
/// there, so every input means something.
pub fn records(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        if data.len() < 2 {
            return None;
        }
        let len = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let rest = &data[2..];
        let (record, tail) = rest.split_at(len.min(rest.len()));
        data = tail;
        Some(record)
    })
}

#[cfg(test)]
mod tests {
    use super::records;

    #[test]
    fn records_split_and_keep_a_short_tail() {
        let data = [2, 0, b'a', b'b', 0, 0, 5, 0, b'c'];
        let got: Vec<&[u8]> = records(&data).collect();
        assert_eq!(got, vec![&b"ab"[..], &b""[..], &b"c"[..]]);
        assert_eq!(records(&[7]).count(), 0);
    }
}
