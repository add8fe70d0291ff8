"""A slow filesystem for tests and benchmarks: a FUSE passthrough (fusepy,
over any directory) whose every read sleeps a given time and bypasses the
page cache, so that a share on it behaves as a slow disk. Creating a name
that begins with `slow-` sleeps as long.

    python3 tests/slowfs.py BACKING MOUNT [--delay SECONDS]

serves in the foreground until SIGTERM or SIGINT; `mounted` does that from
Python and unmounts at the end. Needs root, libfuse2 and the fusepy module.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# Names made as slowly as reads are read.
SLOW_TO_CREATE = "slow-"


def serve(backing: str, mount: str, delay: float) -> None:
    """A passthrough filesystem whose reads take `delay` seconds."""
    from fuse import FUSE, FuseOSError, Operations, fuse_get_context

    class Slow(Operations):
        def __init__(self) -> None:
            self.root = backing

        def _p(self, path: str) -> str:
            return os.path.join(self.root, path.lstrip("/"))

        def __call__(self, op, path, *args):
            try:
                return super().__call__(op, path, *args)
            except OSError as e:
                raise FuseOSError(e.errno or errno.EIO)

        def access(self, path, mode):
            if not os.access(self._p(path), mode):
                raise FuseOSError(errno.EACCES)

        def chmod(self, path, mode):
            return os.chmod(self._p(path), mode)

        def chown(self, path, uid, gid):
            return os.chown(self._p(path), uid, gid)

        def getattr(self, path, fh=None):
            st = os.lstat(self._p(path))
            return {k: getattr(st, k) for k in (
                "st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                "st_size", "st_uid", "st_ino")}

        def readdir(self, path, fh):
            return [".", ".."] + os.listdir(self._p(path))

        def readlink(self, path):
            return os.readlink(self._p(path))

        def rmdir(self, path):
            return os.rmdir(self._p(path))

        def _own(self, path):
            # What a caller makes is theirs, as on any filesystem (the
            # daemon, root, makes it).
            uid, gid, _ = fuse_get_context()
            os.lchown(self._p(path), uid, gid)

        def mkdir(self, path, mode):
            os.mkdir(self._p(path), mode)
            self._own(path)

        def statfs(self, path):
            st = os.statvfs(self._p(path))
            return {k: getattr(st, k) for k in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                "f_files", "f_flag", "f_frsize", "f_namemax")}

        def unlink(self, path):
            return os.unlink(self._p(path))

        def rename(self, old, new):
            return os.rename(self._p(old), self._p(new))

        def utimens(self, path, times=None):
            return os.utime(self._p(path), times)

        def open(self, path, flags):
            return os.open(self._p(path), flags)

        def create(self, path, mode, fi=None):
            # A name meant to be slow to make (tests/test_slow_share.py).
            if os.path.basename(path).startswith(SLOW_TO_CREATE):
                time.sleep(delay)
            fd = os.open(self._p(path), os.O_WRONLY | os.O_CREAT, mode)
            self._own(path)
            return fd

        def read(self, path, size, offset, fh):
            time.sleep(delay)
            return os.pread(fh, size, offset)

        def write(self, path, data, offset, fh):
            return os.pwrite(fh, data, offset)

        def truncate(self, path, length, fh=None):
            with open(self._p(path), "r+") as f:
                f.truncate(length)

        def flush(self, path, fh):
            return 0

        def release(self, path, fh):
            return os.close(fh)

        def fsync(self, path, datasync, fh):
            return os.fsync(fh)

        def getxattr(self, path, name, position=0):
            try:
                return os.getxattr(self._p(path), name)
            except OSError as e:
                raise FuseOSError(errno.ENODATA if e.errno == errno.ENODATA else e.errno)

        def setxattr(self, path, name, value, options, position=0):
            return os.setxattr(self._p(path), name, value, options)

        def listxattr(self, path):
            return os.listxattr(self._p(path))

        def removexattr(self, path, name):
            return os.removexattr(self._p(path), name)

    FUSE(Slow(), mount, foreground=True, nothreads=False, allow_other=True,
         direct_io=True, default_permissions=False)


@contextlib.contextmanager
def mounted(backing: Path, mount: Path, delay: float):
    """Serves `backing` at `mount` with reads `delay` seconds slow while
    the block runs."""
    fuse = subprocess.Popen([sys.executable, __file__, str(backing), str(mount),
                             "--delay", str(delay)])
    try:
        deadline = time.monotonic() + 10
        while not os.path.ismount(mount):
            if time.monotonic() > deadline or fuse.poll() is not None:
                raise RuntimeError(f"the slow filesystem did not mount at {mount}")
            time.sleep(0.05)
        yield
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
        fuse.send_signal(signal.SIGTERM)
        try:
            fuse.wait(timeout=30)
        except subprocess.TimeoutExpired:
            fuse.kill()
            fuse.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("backing")
    ap.add_argument("mount")
    ap.add_argument("--delay", type=float, default=0.2)
    args = ap.parse_args()
    serve(args.backing, args.mount, args.delay)
    return 0


if __name__ == "__main__":
    sys.exit(main())
