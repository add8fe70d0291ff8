//! The io_uring engine over real sockets on loopback.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream as StdStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use copyless_proto::client::{write_negotiate_request, NegotiateOffer};
use copyless_proto::negotiate::{DIALECT_210, SIGNING_ENABLED};
use copyless_proto::{command, status};
use copyless_scripted::{config, memory_server, Client, Request};
use copyless_trace::Tracer;

use super::bell::Bell;
use super::conn::write_now;
use super::ops::{Fd, Ops};
use super::pool::Pool;
use super::worker::{Loop, Mailbox, Peers, Shared, Tag, ToWorker, NEWS};
use crate::admission::{AdmissionLimits, Table};
use crate::logons::Logons;
use crate::{framing, lock, Accepted, Connections, EngineLimits, LiveLimits};

fn limits() -> EngineLimits {
    EngineLimits {
        admission: AdmissionLimits {
            max_connections: 8,
            max_unauthenticated: 8,
            max_unauthenticated_per_address: 8,
        },
        preauth_timeout: Duration::from_secs(30),
        max_local_watches: 0,
    }
}

/// A NEGOTIATE request for SMB 2.1, as a client's first frame.
fn negotiate(client: &mut Client) -> Vec<u8> {
    client.frame(vec![Request::new(command::NEGOTIATE, 1, |w| {
        write_negotiate_request(
            w,
            &NegotiateOffer {
                security_mode: SIGNING_ENABLED,
                capabilities: 0,
                client_guid: [5; 16],
                dialects: &[DIALECT_210],
                contexts: &[],
            },
        )
        .unwrap()
    })])
}

/// A connected pair on loopback: the client's end, and the server's end
/// with the client's address.
fn pair(l: &TcpListener) -> (StdStream, StdStream, std::net::SocketAddr) {
    let client = StdStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, peer) = l.accept().unwrap();
    (client, server, peer)
}

/// More connections receiving in one turn than the ring's pool has
/// buffers: a receive that finds the pool empty fails with ENOBUFS, and
/// the connection reads into a buffer of its own instead of losing the
/// bytes or its client. Here the pool's one buffer is held throughout.
#[test]
fn a_receive_that_finds_the_pool_empty_reads_into_a_buffer_of_its_own() {
    let (server, _) = memory_server(config(), Arc::default());
    let frame = negotiate(&mut Client::connect(server.clone()));
    let tracer = Tracer::new(Vec::new(), false);
    let shared = Shared {
        server,
        limits: LiveLimits::new(limits()),
        tracer: tracer.clone(),
        logons: {
            let audit = crate::AuditLog::start(crate::AuditTo::Journal).unwrap().0;
            Logons::start(tracer, audit).unwrap().0
        },
        post: Arc::default(),
    };
    let l = TcpListener::bind("127.0.0.1:0").unwrap();

    // Something else holds the pool's one buffer (a ring stays on the
    // thread that made it).
    let (mut other, taken, _) = pair(&l);
    let bell = Bell::new().unwrap();
    let inbox: Mailbox = Arc::default();
    let peers: Peers = Arc::new(Mutex::new(vec![(inbox.clone(), bell.clone())]));
    let (b, i) = (bell.clone(), inbox.clone());
    let (dry_tx, dry) = std::sync::mpsc::channel();
    let looping = std::thread::spawn(move || {
        let mut ops = Ops::new(64).unwrap().with_recv_pool(1, 64 * 1024).unwrap();
        let taken: Fd = Arc::new(taken);
        let mut results = Vec::new();
        for byte in [b"x", b"y"] {
            other.write_all(byte).unwrap();
            ops.recv_pooled(taken.clone(), Tag::Cancel).unwrap();
            let mut done = Vec::new();
            while done.is_empty() {
                ops.wait(Some(Duration::from_secs(5))).unwrap();
                ops.reap(&mut done);
            }
            results.push((done[0].result, done[0].buffer.is_some()));
        }
        dry_tx.send(results).unwrap();
        Loop::new(ops, shared, Pool::new(2), i, b, peers).run();
    });
    let results = dry.recv().unwrap();
    assert_eq!(results[0], (1, true), "the pool's buffer, kept");
    assert_eq!(results[1], (-libc::ENOBUFS, false), "the pool is dry");

    let (mut client, stream, peer) = pair(&l);
    let stream = Arc::new(stream);
    let connections: Connections = Arc::new(Mutex::new(Table::new(limits().admission)));
    let id = lock(&connections)
        .admit(peer.ip(), stream.clone())
        .unwrap()
        .id;
    let accepted = Accepted {
        id,
        stream,
        peer,
        connections,
    };
    let tell = |what| {
        inbox.lock().unwrap().push(what);
        bell.ring(NEWS);
    };
    tell(ToWorker::Serve(accepted));
    client
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    framing::write_frame(&mut client, &frame).unwrap();
    let mut head = [0; 4];
    client.read_exact(&mut head).unwrap();
    let mut reply = vec![0; framing::announced(head, 1 << 20).unwrap()];
    client.read_exact(&mut reply).unwrap();
    let status_field = u32::from_le_bytes(reply[8..12].try_into().unwrap());
    let command_field = u16::from_le_bytes(reply[12..14].try_into().unwrap());
    assert_eq!(command_field, command::NEGOTIATE);
    assert_eq!(status_field, status::SUCCESS);

    // Told to stop, the loop ends once its connection has.
    tell(ToWorker::Stop);
    drop(client);
    looping.join().unwrap();
}

/// A connected pair over loopback: the first non-blocking, as the
/// engine's sockets are.
fn nonblocking_pair() -> (StdStream, StdStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (b, a, _) = pair(&listener);
    a.set_nonblocking(true).unwrap();
    (a, b)
}

#[test]
fn replies_that_fit_the_socket_are_written_at_once_in_order() {
    let (a, mut b) = nonblocking_pair();
    let mut bufs = vec![vec![1u8; 10], vec![2u8; 20], vec![3u8; 5]];
    write_now(&a, &mut bufs).unwrap();
    assert!(bufs.is_empty());
    let mut got = [0u8; 35];
    b.read_exact(&mut got).unwrap();
    assert_eq!(&got[..10], &[1; 10]);
    assert_eq!(&got[10..30], &[2; 20]);
    assert_eq!(&got[30..], &[3; 5]);
}

#[test]
fn what_the_socket_cannot_take_is_left_to_send() {
    let (a, mut b) = nonblocking_pair();
    let sent: Vec<Vec<u8>> = (0..3u8)
        .map(|i| (0..16 << 20).map(|j: u32| (j as u8) ^ i).collect())
        .collect();
    let mut bufs = sent.clone();
    write_now(&a, &mut bufs).unwrap();
    let left: usize = bufs.iter().map(Vec::len).sum();
    let total: usize = sent.iter().map(Vec::len).sum();
    assert!(left > 0 && left < total, "{left} of {total} left");
    let mut got = vec![0u8; total - left];
    b.read_exact(&mut got).unwrap();
    let mut whole = got;
    for buf in bufs {
        whole.extend(buf);
    }
    assert_eq!(whole, sent.concat());
}
