//! The messages of a frame (MS-SMB2 3.3.5.2.7, 3.2.5.1.9): each header's
//! NextCommand leads, 8-byte aligned and past its own header, to the next
//! message inside the frame; 0 ends the chain. Server, client and tests
//! walk compounds with this one reading.

use crate::header::Header;
use crate::wire::{Error, Result};
use crate::HEADER_LEN;

/// One message of a compound.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    pub header: Header,
    /// The message from its header to the next message (padding included),
    /// or to the end of the frame for the last.
    pub bytes: &'a [u8],
    /// Where it starts in the frame.
    pub offset: usize,
    /// No message follows.
    pub last: bool,
}

/// The messages of `frame`, in order. A message that cannot be framed (no
/// valid header, or a NextCommand that is unaligned, inside the header or
/// past the frame) ends the walk with an error.
pub fn messages(frame: &[u8]) -> Messages<'_> {
    Messages {
        frame,
        offset: 0,
        done: false,
    }
}

pub struct Messages<'a> {
    frame: &'a [u8],
    offset: usize,
    done: bool,
}

impl<'a> Iterator for Messages<'a> {
    type Item = Result<Message<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let offset = self.offset;
        let rest = &self.frame[offset..];
        let header = match Header::parse(rest) {
            Ok(h) => h,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let next = header.next_command as usize;
        if next == 0 {
            self.done = true;
            return Some(Ok(Message {
                header,
                bytes: rest,
                offset,
                last: true,
            }));
        }
        if !next.is_multiple_of(8) || next < HEADER_LEN || next >= rest.len() {
            self.done = true;
            return Some(Err(Error("bad NextCommand")));
        }
        self.offset += next;
        Some(Ok(Message {
            header,
            bytes: &rest[..next],
            offset,
            last: false,
        }))
    }
}

/// Every message of a frame, or the error of the first that cannot be
/// framed.
pub fn split(frame: &[u8]) -> Result<Vec<&[u8]>> {
    messages(frame).map(|m| m.map(|m| m.bytes)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(next: u32, body: usize) -> Vec<u8> {
        let mut m = Vec::new();
        Header {
            next_command: next,
            ..Header::default()
        }
        .write(&mut m);
        m.resize(HEADER_LEN + body, 0);
        m
    }

    #[test]
    fn walks_a_chain_and_stops_at_a_bad_link() {
        let mut frame = message(72, 8);
        frame.extend(message(0, 3));
        let all: Vec<Message<'_>> = messages(&frame).map(|m| m.unwrap()).collect();
        assert_eq!(all.len(), 2);
        assert_eq!(
            (all[0].offset, all[0].bytes.len(), all[0].last),
            (0, 72, false)
        );
        assert_eq!(
            (all[1].offset, all[1].bytes.len(), all[1].last),
            (72, 67, true)
        );
        for bad in [4u32, 60, 68, 1000] {
            let mut frame = message(bad, 8);
            frame.extend(message(0, 3));
            let walked: Vec<_> = messages(&frame).collect();
            assert_eq!(walked.len(), 1, "NextCommand {bad}");
            assert!(walked[0].is_err());
        }
        assert!(messages(b"short").next().unwrap().is_err());
        assert_eq!(split(&message(0, 0)).unwrap().len(), 1);
    }
}
