//! NDR20 (C706 chapter 14) encoding of the few constructs srvsvc needs:
//! aligned little-endian integers, unique pointers and conformant varying
//! UTF-16 strings. Alignment is relative to the start of the stub data.

/// The stub data does not follow the interface's IDL; answered with the
/// fault nca_s_fault_ndr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NdrError;

pub struct NdrReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> NdrReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        NdrReader { buf, pos: 0 }
    }

    fn align(&mut self, n: usize) -> Result<(), NdrError> {
        let aligned = self.pos.checked_next_multiple_of(n).ok_or(NdrError)?;
        if aligned > self.buf.len() {
            return Err(NdrError);
        }
        self.pos = aligned;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], NdrError> {
        let end = self.pos.checked_add(n).ok_or(NdrError)?;
        let bytes = self.buf.get(self.pos..end).ok_or(NdrError)?;
        self.pos = end;
        Ok(bytes)
    }

    pub fn u32(&mut self) -> Result<u32, NdrError> {
        self.align(4)?;
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A unique (or full) pointer's referent id; true when not NULL.
    pub fn pointer(&mut self) -> Result<bool, NdrError> {
        Ok(self.u32()? != 0)
    }

    /// A `[string] wchar_t*` pointee: max count, offset, actual count, then
    /// the UTF-16 code units, the last of which is normally the NUL.
    pub fn string(&mut self) -> Result<String, NdrError> {
        let max_count = self.u32()?;
        let offset = self.u32()?;
        let actual = self.u32()?;
        if offset != 0 || actual > max_count {
            return Err(NdrError);
        }
        let byte_len = usize::try_from(actual)
            .ok()
            .and_then(|n| n.checked_mul(2))
            .ok_or(NdrError)?;
        let bytes = self.take(byte_len)?;
        let mut units: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        while units.last() == Some(&0) {
            units.pop();
        }
        Ok(String::from_utf16_lossy(&units))
    }
}

pub struct NdrWriter {
    buf: Vec<u8>,
    next_referent: u32,
}

impl NdrWriter {
    pub fn new() -> Self {
        // Windows and Samba number referents from 0x00020000 in steps of 4;
        // any unique non-zero values would do, these read familiarly in traces.
        NdrWriter {
            buf: Vec::new(),
            next_referent: 0x0002_0000,
        }
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    fn align(&mut self, n: usize) {
        let aligned = self.buf.len().next_multiple_of(n);
        self.buf.resize(aligned, 0);
    }

    pub fn u32(&mut self, v: u32) {
        self.align(4);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    /// Writes a unique pointer: a fresh referent id, or 0 for NULL.
    pub fn pointer(&mut self, present: bool) {
        if present {
            let id = self.next_referent;
            self.next_referent = self.next_referent.wrapping_add(4);
            self.u32(id);
        } else {
            self.u32(0);
        }
    }

    /// Writes a conformant varying string with its terminating NUL.
    pub fn string(&mut self, s: &str) {
        let units: Vec<u16> = s.encode_utf16().chain(std::iter::once(0)).collect();
        // A u32 count is far beyond anything built from our own share list;
        // saturate rather than wrap should that ever change.
        let count = u32::try_from(units.len()).unwrap_or(u32::MAX);
        self.u32(count);
        self.u32(0);
        self.u32(count);
        for u in units {
            self.buf.extend_from_slice(&u.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_layout_matches_c706() {
        let mut w = NdrWriter::new();
        w.string("ab");
        w.u32(7);
        let b = w.finish();
        assert_eq!(
            b,
            [
                3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, b'a', 0, b'b', 0, 0, 0, // "ab\0"
                0, 0, // pad to 4
                7, 0, 0, 0
            ]
        );
        let mut r = NdrReader::new(&b);
        assert_eq!(r.string().unwrap(), "ab");
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.u32(), Err(NdrError));
    }

    #[test]
    fn referents_are_unique_and_null_is_zero() {
        let mut w = NdrWriter::new();
        w.pointer(true);
        w.pointer(false);
        w.pointer(true);
        assert_eq!(
            w.finish(),
            [0, 0, 2, 0, 0, 0, 0, 0, 4, 0, 2, 0],
            "referent ids 0x20000, NULL, 0x20004"
        );
    }

    #[test]
    fn string_rejects_bad_counts() {
        // actual count above max count
        let b = [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, b'a', 0, 0, 0];
        assert_eq!(NdrReader::new(&b).string(), Err(NdrError));
        // non-zero offset
        let b = [2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, b'a', 0];
        assert_eq!(NdrReader::new(&b).string(), Err(NdrError));
        // actual count larger than the bytes present
        let b = [
            0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, b'a', 0,
        ];
        assert_eq!(NdrReader::new(&b).string(), Err(NdrError));
    }

    #[test]
    fn reader_alignment_past_end_fails() {
        let b = [1, 0];
        let mut r = NdrReader::new(&b);
        assert_eq!(r.u32(), Err(NdrError));
    }
}
