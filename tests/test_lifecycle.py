"""Starting and stopping the server process."""

from __future__ import annotations

import signal
import socket
import subprocess
import time

import pytest
import smbclient

from conftest import SERVER_KIND

GRACEFUL_STOP_SECONDS = 5.0


@pytest.mark.skipif(SERVER_KIND == "samba", reason="smbd's exit status on SIGTERM is not ours to judge")
def test_sigterm_stops_gracefully_with_a_client_connected(running_server):
    server = running_server.info
    smbclient.reset_connection_cache()
    smbclient.register_session(server.host, username=server.user, password=server.password,
                               port=server.port, require_signing=True, auth_protocol="ntlm")
    unc = f"\\\\{server.host}\\{server.share}\\open-at-stop.txt"
    handle = smbclient.open_file(unc, mode="wb", port=server.port)
    try:
        handle.write(b"written before SIGTERM\n")
        handle.flush()

        started = time.monotonic()
        running_server.proc.send_signal(signal.SIGTERM)
        try:
            status = running_server.proc.wait(timeout=GRACEFUL_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"server still running {GRACEFUL_STOP_SECONDS:.0f} s after SIGTERM\n"
                + running_server.logs()
            )
        elapsed = time.monotonic() - started
    finally:
        # The server is gone; closing the client side may fail, which is fine.
        try:
            handle.close()
        except Exception:
            pass
        try:
            smbclient.reset_connection_cache()
        except Exception:
            pass

    assert status == 0, f"exit status {status} after SIGTERM (expected 0)\n" + running_server.logs()
    assert (server.share_path / "open-at-stop.txt").read_bytes() == b"written before SIGTERM\n", (
        "data written and flushed before SIGTERM is not on disk"
    )
    with pytest.raises(OSError):
        socket.create_connection((server.host, server.port), timeout=2).close()
    print(f"stopped in {elapsed:.2f} s")
