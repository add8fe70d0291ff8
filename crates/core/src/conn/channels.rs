//! Multichannel (MS-SMB2 3.3.5.5): a connection bound to a session that
//! another connection holds. The session stays with its home connection,
//! which alone runs its requests (docs/MULTICHANNEL.md, "relay"): a bound
//! channel takes the credits of what it receives, opens what is sealed,
//! and hands the requests to the home by letter; the home checks each
//! against the channel's key, runs it as its own, and hands the replies
//! back signed with that key or sealed, for the channel to send. Nothing
//! of a session is shared between threads but its facts in the server's
//! session table.

use std::sync::Arc;

use copyless_crypto::{Cipher, PreauthHash, SigningKey};
use copyless_proto::command as cmd;
use copyless_proto::header::{Header, TRANSFORM_PROTOCOL_ID};
use copyless_proto::transform::Sealed;

use crate::conn::connection::{Chain, Connection, Output};
use crate::conn::post::{ConnectionId, Kind};
use crate::env::Env;

/// This connection's place in a session held by another (Channel, MS-SMB2
/// 3.3.1.14). The home signs with the channel's key; it is kept here too
/// for the session's end.
pub(crate) struct Bound {
    pub home: ConnectionId,
    pub decrypt: Option<Arc<Cipher>>,
    pub key: Arc<SigningKey>,
    /// Its place among the session's channels, held while it is bound.
    pub _slot: copyless_state::sessions::ChannelSlot,
}

/// A bind under way on this connection: its authentication, and the
/// pre-authentication hash its channel key is derived from.
pub(crate) struct Binding {
    pub acceptor: Box<copyless_auth::Acceptor>,
    pub preauth: PreauthHash,
}

/// Where a relayed compound's replies go, the credits each of its
/// requests' replies grant (the channel took them), and the size of the
/// relayed frame, which the channel counts until the compound is done.
pub(crate) struct Via {
    pub to: ConnectionId,
    pub grants: Vec<u16>,
    pub bytes: usize,
}

impl Via {
    /// Where a later reply of a relayed request goes (an interim or
    /// final response); its compound is accounted for already.
    pub(crate) fn reply_to(to: ConnectionId) -> Via {
        Via {
            to,
            grants: Vec::new(),
            bytes: 0,
        }
    }
}

/// Room beyond twice the largest READ or WRITE for relayed frames waiting
/// at their homes (see [`Connection::relay`]).
const RELAY_SLACK: usize = 1 << 20;

/// A relayed frame waiting to run at its session's home.
pub(crate) struct Relay {
    pub from: ConnectionId,
    pub frame: Vec<u8>,
    /// It came sealed for this session.
    pub sealed: Option<u64>,
    pub grants: Vec<u16>,
}

impl Connection {
    /// The home of the session a received frame is for, when it is one
    /// this connection is bound to and does not hold.
    pub(crate) fn relay_home(&self, frame: &[u8]) -> Option<ConnectionId> {
        if self.bound.is_empty() {
            return None;
        }
        let sid = if frame.starts_with(&TRANSFORM_PROTOCOL_ID) {
            Sealed::parse(frame).ok()?.header.session_id
        } else {
            Header::parse(frame).ok()?.session_id
        };
        if self.sessions.contains_key(&sid) {
            return None;
        }
        self.bound.get(&sid).map(|b| b.home)
    }

    /// Whether the engine should read more frames: not while the frames
    /// this connection relayed wait at their homes beyond what an engine
    /// reads ahead on a connection of its own (twice the largest READ or
    /// WRITE, and some), so that a slow home holds back the client as a
    /// slow disk does.
    pub fn wants_frames(&self) -> bool {
        self.relaying.values().sum::<usize>() < self.relay_pause()
    }

    fn relay_pause(&self) -> usize {
        2 * self.made_with.max_io_size as usize + RELAY_SLACK
    }

    /// Hands a frame for a bound session to its home: opens it when
    /// sealed, and takes its requests' credits here, where the client
    /// spends them. A frame that does not open or frame, or that spends
    /// credits it was not given, ends the connection, as it would for a
    /// session of its own; so does one past twice the point where the
    /// engine was to stop reading ([`Connection::wants_frames`]).
    pub(crate) fn relay(&mut self, frame: &[u8], home: ConnectionId) -> Output {
        let waiting: usize = self.relaying.values().sum();
        if waiting + frame.len() > 2 * self.relay_pause() {
            return Output::close(Vec::new());
        }
        let (plain, sealed) = if frame.starts_with(&TRANSFORM_PROTOCOL_ID) {
            let mut copy = frame.to_vec();
            let Ok(sid) = Sealed::parse(&copy).map(|s| s.header.session_id) else {
                return Output::close(Vec::new());
            };
            let opened = self
                .bound
                .get(&sid)
                .and_then(|b| b.decrypt.clone())
                .is_some_and(|d| crate::conn::encryption::open_in_place(&d, &mut copy));
            if !opened {
                return Output::close(Vec::new());
            }
            let start = copyless_proto::transform::TRANSFORM_HEADER_LEN;
            (copy.split_off(start), Some(sid))
        } else {
            (frame.to_vec(), None)
        };
        let mut grants = Vec::new();
        for m in copyless_proto::compound::messages(&plain) {
            let Ok(m) = m else {
                return Output::close(Vec::new());
            };
            let hdr = m.header;
            if hdr.command == cmd::CANCEL {
                grants.push(0);
                continue;
            }
            if !self
                .credits
                .consume(hdr.message_id, self.credit_charge(&hdr))
            {
                return Output::close(Vec::new());
            }
            grants.push(self.credits.grant(hdr.credits.max(1)));
        }
        *self.relaying.entry(home).or_default() += plain.len();
        let from = self.id();
        self.post(
            home,
            Kind::Relay {
                from,
                frame: plain,
                sealed,
                grants,
            },
        );
        Output::default()
    }

    /// Runs the frames bound channels relayed here, each as if it had
    /// come on this connection; their replies go back by letter.
    pub(crate) fn run_relays(&mut self, env: &mut dyn Env, out: &mut Output) {
        for r in std::mem::take(&mut self.relays) {
            let mut chain = Chain::new(r.sealed);
            chain.via = Some(Via {
                to: r.from,
                grants: r.grants,
                bytes: r.frame.len(),
            });
            self.drive(chain, &r.frame, None, env, out);
        }
    }

    /// Replies home `from` sent for requests this connection relayed;
    /// `done` bytes of relayed frames are no longer held there.
    pub(crate) fn take_relayed(
        &mut self,
        from: ConnectionId,
        frame: Vec<u8>,
        granted: u64,
        done: usize,
        disconnect: bool,
    ) {
        if let Some(bytes) = self.relaying.get_mut(&from) {
            *bytes = bytes.saturating_sub(done);
            if *bytes == 0 {
                self.relaying.remove(&from);
            }
        }
        self.credits.release(granted);
        if !frame.is_empty() {
            self.relayed.push(frame);
        }
        self.relayed_disconnect |= disconnect;
    }

    /// A bound channel went away: its key goes, and so do the requests
    /// it relayed that wait here; the sessions live on (MS-SMB2 3.3.7.1).
    pub(crate) fn channel_gone(&mut self, channel: ConnectionId) {
        for s in self.sessions.values_mut() {
            s.channels.remove(&channel);
        }
        self.forget_relayed_from(channel);
    }

    /// Tells every bound channel of a session that it ended here. Their
    /// keys stay while the session is kept logged off, to sign what its
    /// end answers there.
    pub(crate) fn end_channels(&mut self, session_id: u64) {
        let Some(s) = self.sessions.get(&session_id) else {
            return;
        };
        let channels: Vec<ConnectionId> = s.channels.keys().copied().collect();
        for c in channels {
            self.post(c, Kind::SessionEnded { session_id });
        }
    }

    /// A session this connection was a channel of ended at its home.
    pub(crate) fn session_ended(&mut self, session_id: u64) {
        if let Some(bound) = self.bound.remove(&session_id) {
            if !self.bound.values().any(|b| b.home == bound.home) {
                // What waited there is not coming back.
                self.relaying.remove(&bound.home);
            }
            const KEEP: usize = 16;
            if self.ended_channels.len() == KEEP {
                self.ended_channels.remove(0);
            }
            self.ended_channels.push((session_id, bound.key));
        }
    }

    /// This connection is going: the homes of the sessions it was bound
    /// to lose it as a channel.
    pub(crate) fn leave_channels(&mut self) {
        let homes: Vec<ConnectionId> = self.bound.drain().map(|(_, b)| b.home).collect();
        let channel = self.id();
        for home in homes {
            self.post(home, Kind::ChannelGone { channel });
        }
    }

    /// Moves the replies homes sent back into the output.
    pub(crate) fn relayed_frames(&mut self, out: &mut Output) {
        out.frames.append(&mut self.relayed);
        out.disconnect |= std::mem::take(&mut self.relayed_disconnect);
    }
}
