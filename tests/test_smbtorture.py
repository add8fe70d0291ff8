"""Samba's own test suite, smbtorture, against the server."""

from __future__ import annotations

import re

from support import run


def smbtorture(server, test: str):
    return run(
        [
            "smbtorture",
            f"//{server.host}/{server.share}",
            "-p", str(server.port),
            "-U", f"{server.user}%{server.password}",
            "--option=client signing=required",
            test,
        ],
        timeout=120,
    )


def test_smb2_connect(server):
    result = smbtorture(server, "smb2.connect")
    assert result.returncode == 0, "smbtorture smb2.connect failed\n" + result.describe()
    assert re.search(r"^success: connect$", result.output, re.MULTILINE), (
        "smbtorture did not report 'success: connect'\n" + result.describe()
    )
    bad = re.findall(r"^(?:failure|error|skip|xfail)\b.*$", result.output, re.MULTILINE | re.IGNORECASE)
    assert not bad, f"smbtorture reported {bad}\n" + result.describe()
