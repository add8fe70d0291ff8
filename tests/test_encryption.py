"""SMB3 encryption, asked for by the client: data goes both ways intact."""

from __future__ import annotations

import os

import pytest

from support import NT_STATUS_RE, run, sha256_file, smbclient_argv


@pytest.mark.parametrize("dialect", ["SMB3_00", "SMB3_02", "SMB3_11"])
def test_encrypted_put_and_get(server, client_conf, temp_dir, dialect):
    src = temp_dir / "src.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    back = temp_dir / "back.bin"
    argv = smbclient_argv(
        server, client_conf, share=server.share, dialect=dialect,
        extra=["--option=client smb encrypt=required",
               "-c", f"put {src} enc.bin; get enc.bin {back}; del enc.bin"],
    )
    result = run(argv, timeout=120)
    statuses = NT_STATUS_RE.findall(result.output)
    assert result.returncode == 0 and not statuses, result.describe()
    assert sha256_file(back) == sha256_file(src), "data changed on an encrypted round trip"
    assert not os.path.exists(os.path.join(server.share_path, "enc.bin"))
