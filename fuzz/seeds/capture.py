#!/usr/bin/env python3
"""Seeds the fuzz corpora from real client traffic.

    fuzz/seeds/capture.py OUT_DIR [--binary PATH] [--quick]

Starts copyless, puts a relay in front of it that records every frame a
client sends, and runs real clients through the relay: smbclient (file
operations, streams, ACLs, share listing over srvsvc), Python smbprotocol,
and smbtorture tests (compounds, locks, oplocks, leases, notify, durable
handles, ACLs, streams). The frames are then written as inputs of each
fuzz target in OUT_DIR/<target>/, in the formats fuzz/src documents.
Minimise before committing (docs/FUZZING.md).
"""

import argparse
import hashlib
import os
import pwd
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "seed", "Seed-pass-1"

# Input formats (fuzz/src/connection.rs, parsers.rs, auth.rs, rpc.rs).
MODE_LOGIN, MODE_GUEST, MODE_SMB311 = 0x01, 0x02, 0x04
FIX_MESSAGE_ID, FIX_SESSION, FIX_FILE_ID, SIGN, ENCRYPT = 0x01, 0x02, 0x04, 0x08, 0x20
AUTH_GUEST, AUTH_FROM_CLIENT = 0x01, 0x02
SEL_SMB2, SEL_TRANSFORM, SEL_SMB1, SEL_DESCRIPTOR, SEL_SET_INFO, SEL_WILDCARD, SEL_NAME = range(7)

NEGOTIATE, SESSION_SETUP, CREATE, WRITE, IOCTL, QUERY_DIRECTORY, SET_INFO = 0, 1, 5, 9, 11, 14, 17
FSCTL_PIPE_TRANSCEIVE = 0x0011C017
SMB2_INFO_SECURITY = 3

# smbtorture tests worth their traffic; several fail against copyless
# today, which does not matter for seeds: their requests are what counts.
TORTURE = [
    "smb2.connect", "smb2.read.position", "smb2.dir.find", "smb2.dir.file-index",
    "smb2.rename.simple", "smb2.rename.msword", "smb2.sharemode.sharemode-access",
    "smb2.compound.related1", "smb2.compound.related2", "smb2.compound.unrelated1",
    "smb2.compound.invalid1", "smb2.compound.interim2", "smb2.compound.compound-padding",
    "smb2.create.open", "smb2.create.multi", "smb2.create.blob", "smb2.create.leading-slash",
    "smb2.credits.skipped_mid", "smb2.streams.io", "smb2.streams.names",
    "smb2.streams.create-disposition", "smb2.acls.OWNER", "smb2.acls.DENY1",
    "smb2.acls.INHERITANCE", "smb2.getinfo", "smb2.setinfo", "smb2.lock.valid-request",
    "smb2.lock.cancel", "smb2.oplock.exclusive1", "smb2.oplock.batch1", "smb2.lease.request",
    "smb2.notify.valid-req", "smb2.notify.tree", "smb2.durable-open.open-oplock",
    "smb2.durable-v2-open.create-blob", "smb2.ioctl.shadow_copy", "smb2.ioctl.req_resume_key",
    "smb2.session.reauth1", "smb2.tcon", "smb2.flush", "smb2.set-sparse-ioctl",
    "smb2.delete-on-close-perms", "smb2.maximum_allowed", "smb2.twrp.listdir",
]
TORTURE_QUICK = ["smb2.connect", "smb2.compound.related1", "smb2.getinfo", "smb2.lock.valid-request"]

MAX_FRAME = 32 * 1024  # longer frames (large WRITEs) are cut to this
RECORDS_PER_INPUT = 24


def unix_user_args():
    """Links the user to a system account of its name as root (made when
    missing, linked when there), else to the account we run as."""
    if os.geteuid() == 0:
        return ["--create-unix-user"]
    return ["--unix-user", pwd.getpwuid(os.geteuid()).pw_name]


class Server:
    def __init__(self, binary):
        self.dir = Path(tempfile.mkdtemp(prefix="copyless-seeds-"))
        self.share = self.dir / "share"
        self.share.mkdir()
        state = self.dir / "state"
        subprocess.run([binary, "user", "add", USER, *unix_user_args(), "--password-stdin",
                        "--state-dir", str(state)],
                       input=PASSWORD + "\n", text=True, check=True, capture_output=True)
        if os.geteuid() == 0:
            # The user acts as its own Unix account on disk: the share is theirs.
            self.dir.chmod(0o755)
            owner = pwd.getpwnam(USER)
            os.chown(self.share, owner.pw_uid, owner.pw_gid)
        self.log = open(self.dir / "server.log", "w")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--share", f"share={self.share}",
             "--state-dir", str(state)],
            stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.port = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(r"copyless listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            self.stop()
            sys.exit("copyless did not start")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Relay:
    """Forwards connections to the server and keeps the frames clients send."""

    def __init__(self, server_port):
        self.server_port = server_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = []  # one list of frames per client connection
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            client, _ = self.listener.accept()
            upstream = socket.create_connection(("127.0.0.1", self.server_port))
            frames = []
            with self.lock:
                self.connections.append(frames)
            threading.Thread(target=self.pump, args=(client, upstream, frames), daemon=True).start()
            threading.Thread(target=self.pump, args=(upstream, client, None), daemon=True).start()

    @staticmethod
    def pump(src, dst, frames):
        buf = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if frames is None:
                    continue
                buf += data
                while len(buf) >= 4:
                    length = struct.unpack(">I", buf[:4])[0] & 0xFFFFFF
                    if len(buf) < 4 + length:
                        break
                    frames.append(buf[4:4 + length])
                    buf = buf[4 + length:]
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def run(argv, timeout=60, **kw):
    try:
        subprocess.run(argv, capture_output=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        print(f"  (timed out: {' '.join(argv[:4])} ...)")


def smbclient(port, commands, *extra):
    run(["smbclient", "//127.0.0.1/share", "-p", str(port), "-U", f"{USER}%{PASSWORD}",
         *extra, "-c", commands])


def client_workloads(port, work):
    (work / "small.txt").write_bytes(b"hello fuzz\n" * 50)
    put = f"lcd {work}; "
    smbclient(port, put + "mkdir d; cd d; put small.txt; get small.txt got.txt; ls; allinfo small.txt; "
              "rename small.txt s2.txt; setmode s2.txt +r; setmode s2.txt -r; del s2.txt; cd ..; rmdir d")
    smbclient(port, put + "put small.txt f.txt; put small.txt f.txt:stream1; allinfo f.txt; "
              "get f.txt:stream1 st.txt; ls f*; ls *.txt; ls <.t>t; showacls; ls; volume; du; "
              "hardlink f.txt h.txt; del f.txt; del h.txt")
    smbclient(port, "ls", "-m", "SMB2_02")
    smbclient(port, "ls", "-m", "SMB2_10")
    smbclient(port, "ls", "-m", "SMB3_00")
    smbclient(port, put + "put small.txt e.txt; get e.txt e2.txt; del e.txt", "-e")
    run(["smbclient", "-L", "//127.0.0.1", "-p", str(port), "-U", f"{USER}%{PASSWORD}"])
    run(["rpcclient", "127.0.0.1", "-p", str(port), "-U", f"{USER}%{PASSWORD}", "-c",
         "srvinfo; netshareenum; netshareenumall; netshareenum 2; netsharegetinfo share; "
         "netsharegetinfo IPC$ 2; netsharegetinfo share 502; netsharegetinfo share 1005; "
         "netremotetod; netfileenum; netsessenum; netdiskenum; netconnenum; netname share"])
    run(["smbtorture", f"ncacn_np:127.0.0.1[\\pipe\\srvsvc]", "-p", str(port),
         "-U", f"{USER}%{PASSWORD}", "rpc.srvsvc"], timeout=60)
    run(["smbcacls", "//127.0.0.1/share", "", "-p", str(port), "-U", f"{USER}%{PASSWORD}"])
    script = f"""
import smbclient, smbclient.path
smbclient.ClientConfig(username={USER!r}, password={PASSWORD!r})
root = r"\\\\127.0.0.1@{port}\\share"
smbclient.register_session("127.0.0.1", port={port}, username={USER!r}, password={PASSWORD!r})
root = r"\\\\127.0.0.1\\share"
smbclient.mkdir(root + r"\\p")
with smbclient.open_file(root + r"\\p\\x.bin", mode="wb") as f:
    f.write(b"x" * 3000)
with smbclient.open_file(root + r"\\p\\x.bin", mode="rb") as f:
    f.read()
smbclient.stat(root + r"\\p\\x.bin")
list(smbclient.scandir(root + r"\\p", search_pattern="*.bin"))
smbclient.rename(root + r"\\p\\x.bin", root + r"\\p\\y.bin")
smbclient.utime(root + r"\\p\\y.bin", times=(1, 2))
smbclient.truncate(root + r"\\p\\y.bin", 10)
smbclient.remove(root + r"\\p\\y.bin")
smbclient.rmdir(root + r"\\p")
"""
    run([sys.executable, "-c", script])


def torture(port, tests):
    for name in tests:
        run(["smbtorture", "//127.0.0.1/share", "-p", str(port), "-U", f"{USER}%{PASSWORD}", name],
            timeout=30)


def split_compound(frame):
    out, start = [], 0
    while len(frame) - start >= 64 and frame[start:start + 4] == b"\xfeSMB":
        nxt = struct.unpack_from("<I", frame, start + 20)[0]
        if nxt < 64 or start + nxt >= len(frame):
            out.append(frame[start:])
            break
        out.append(frame[start:start + nxt])
        start += nxt
    return out


def command(msg):
    return struct.unpack_from("<H", msg, 12)[0]


def records(items):
    return b"".join(struct.pack("<H", len(i)) + i for i in items)


def body_slice(msg, off_at, len_at, off_size=2, len_size=4):
    off = int.from_bytes(msg[off_at:off_at + off_size], "little")
    length = int.from_bytes(msg[len_at:len_at + len_size], "little")
    return msg[off:off + length]


class Corpus:
    def __init__(self, out):
        self.out = out
        self.counts = {}

    def add(self, target, data):
        d = self.out / target
        d.mkdir(parents=True, exist_ok=True)
        path = d / hashlib.sha1(data).hexdigest()
        if not path.exists():
            path.write_bytes(data)
            self.counts[target] = self.counts.get(target, 0) + 1


def write_seeds(connections, corpus):
    # auth, from a real client: unpatched, then its AUTHENTICATE patched.
    corpus.add("auth", bytes([AUTH_FROM_CLIENT]) + records([b"", b"", b""]))
    corpus.add("auth", bytes([AUTH_FROM_CLIENT]) + records([b"", struct.pack("<H", 100) + b"\0\0"]))
    for frames in connections:
        frames = [f[:MAX_FRAME] for f in frames]
        if not frames:
            continue
        # connection, raw: the whole conversation, ids kept in step.
        raw = [bytes([FIX_MESSAGE_ID | FIX_SESSION]) + f for f in frames[:RECORDS_PER_INPUT]]
        corpus.add("connection", bytes([0]) + records(raw))
        corpus.add("connection", bytes([MODE_GUEST]) + records(raw))
        # connection, logged in: what follows the login, in pieces.
        after = [f for f in frames if f[:4] != b"\xfeSMB" or command(f) not in (NEGOTIATE, SESSION_SETUP)]
        fixes = FIX_MESSAGE_ID | FIX_SESSION | FIX_FILE_ID | SIGN
        for i in range(0, len(after), RECORDS_PER_INPUT):
            chunk = [bytes([fixes]) + f for f in after[i:i + RECORDS_PER_INPUT]]
            corpus.add("connection", bytes([MODE_LOGIN]) + records(chunk))
            # The same over SMB 3.1.1, encrypted.
            sealed = [bytes([fixes | ENCRYPT]) + f for f in after[i:i + RECORDS_PER_INPUT]]
            corpus.add("connection", bytes([MODE_LOGIN | MODE_SMB311]) + records(sealed))
        tokens, pipe = [], []
        for f in frames:
            if f[:4] == b"\xfdSMB":
                corpus.add("parsers", bytes([SEL_TRANSFORM]) + f)
                continue
            if f[:4] == b"\xffSMB":
                corpus.add("parsers", bytes([SEL_SMB1]) + f)
                continue
            corpus.add("parsers", bytes([SEL_SMB2]) + f)
            for m in split_compound(f):
                seeds_of_message(m, corpus, tokens, pipe)
        if tokens:
            corpus.add("auth", bytes([0]) + records(tokens))
            corpus.add("auth", bytes([AUTH_GUEST]) + records(tokens))
        # rpc: a bind, then the calls that followed it, a few at a time.
        binds = [r for r in pipe if r[:1] == b"\0" and r[3:4] == b"\x0b"]
        for i in range(0, len(pipe), RECORDS_PER_INPUT):
            chunk = pipe[i:i + RECORDS_PER_INPUT]
            if binds and chunk[0] != binds[0]:
                chunk = binds[:1] + chunk
            corpus.add("rpc", bytes([0]) + records(chunk))


def seeds_of_message(m, corpus, tokens, pipe):
    c = command(m)
    corpus.add("parsers", bytes([SEL_SMB2]) + m)
    if c == SESSION_SETUP and len(m) >= 88:
        tokens.append(body_slice(m, 76, 78, 2, 2))
    elif c == CREATE and len(m) >= 120:
        name = body_slice(m, 108, 110, 2, 2)
        corpus.add("parsers", bytes([SEL_NAME]) + name)
    elif c == QUERY_DIRECTORY and len(m) >= 96:
        pattern = body_slice(m, 88, 90, 2, 2).decode("utf-16-le", "replace")
        corpus.add("parsers", bytes([SEL_WILDCARD]) + pattern.encode() + b"\0" + b"report.final.txt")
    elif c == SET_INFO and len(m) >= 96:
        info_type, cls = m[66], m[67]
        buf = body_slice(m, 72, 68, 2, 4)
        if info_type == SMB2_INFO_SECURITY:
            corpus.add("parsers", bytes([SEL_DESCRIPTOR]) + buf)
        else:
            corpus.add("parsers", bytes([SEL_SET_INFO, cls]) + buf)
    elif c == WRITE and len(m) >= 112:
        data = body_slice(m, 66, 68, 2, 4)
        if data[:2] == b"\x05\x00":
            pipe += [b"\0" + data, b"\1" + struct.pack("<H", 4280)]
    elif c == IOCTL and len(m) >= 120:
        ctl = struct.unpack_from("<I", m, 68)[0]
        data = body_slice(m, 88, 92, 4, 4)
        if ctl == FSCTL_PIPE_TRANSCEIVE and data[:2] == b"\x05\x00":
            pipe += [b"\0" + data, b"\1" + struct.pack("<H", 4280)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    ap.add_argument("--binary", default=str(target / "release" / "copyless"))
    ap.add_argument("--quick", action="store_true", help="a few smbtorture tests only")
    args = ap.parse_args()
    server = Server(args.binary)
    relay = Relay(server.port)
    work = Path(tempfile.mkdtemp(prefix="copyless-seeds-work-"))
    try:
        print("smbclient, smbcacls and smbprotocol ...")
        client_workloads(relay.port, work)
        print("smbtorture ...")
        torture(relay.port, TORTURE_QUICK if args.quick else TORTURE)
        time.sleep(1)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    with relay.lock:
        connections = [list(c) for c in relay.connections]
    corpus = Corpus(Path(args.out))
    write_seeds(connections, corpus)
    print(f"{len(connections)} connections, {sum(map(len, connections))} frames;",
          ", ".join(f"{t}: {n}" for t, n in sorted(corpus.counts.items())))


if __name__ == "__main__":
    main()
