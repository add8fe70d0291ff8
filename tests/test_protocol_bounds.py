"""`[security] min_protocol` and `max_protocol`: an administrator requires
SMB3 of every client, or holds them below a dialect (issue 27)."""

from __future__ import annotations

import uuid

import pytest
from smbprotocol.connection import Connection, Dialects

from conftest import SERVER_KIND, _start_copyless, _stop_copyless, make_temp_dir
from support import smbclient

pytestmark = pytest.mark.skipif(SERVER_KIND != "copyless", reason="copyless's own config")


@pytest.fixture
def bounded():
    running = _start_copyless(make_temp_dir("protocols"), extra_config=(
        '[security]\nmin_protocol = "SMB3"\nmax_protocol = "SMB3_02"\n'))
    try:
        yield running.info
    finally:
        _stop_copyless(running)


@pytest.mark.parametrize("dialect,served", [
    ("SMB2_02", False), ("SMB2_10", False), ("SMB3_00", True), ("SMB3_02", True),
    ("SMB3_11", False),
])
def test_only_the_dialects_within_the_bounds_are_served(bounded, client_conf, dialect, served):
    r = smbclient(bounded, client_conf, "ls", dialect=dialect)
    if served:
        assert r.returncode == 0 and "NT_STATUS" not in r.output, r.describe()
    else:
        assert r.returncode != 0, r.describe()
        assert "NT_STATUS_NOT_SUPPORTED" in r.output or "NT_STATUS_CONNECTION" in r.output, \
            r.describe()


def test_a_client_offering_every_dialect_gets_the_highest_allowed(bounded):
    connection = Connection(uuid.uuid4(), bounded.host, bounded.port, require_signing=True)
    connection.connect(timeout=30)
    try:
        assert connection.dialect == Dialects.SMB_3_0_2
    finally:
        connection.disconnect()
