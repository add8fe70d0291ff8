"""Directory enumerations through a real client against the real server,
with [limits] max_listing_bytes_per_connection small enough that two large
folders listed at once on one connection cannot both keep their whole
listing: the second is kept in windows, each read from the folder where
the one before stopped. Each must still list every name exactly once, in
order; the server proves it read the second folder again by showing a
file added to it meanwhile (a kept listing is the folder as it was when
the enumeration began)."""

from __future__ import annotations

import shutil

import pytest
import smbclient

from conftest import SERVER_KIND, _start_copyless, _stop_copyless, make_temp_dir

pytestmark = pytest.mark.skipif(
    SERVER_KIND != "copyless", reason="max_listing_bytes_per_connection is copyless's own limit"
)

FILES = 20_000  # about 0.8 MiB of names per folder: two pass 1 MiB
BOUND = 1 << 20


def enumerate_two(bound: int | None) -> tuple[list[str], list[str], list[str]]:
    """Lists folders "one" and "two" by taking one entry of each in turn;
    when "two" is a quarter done, a file is added to it and one removed.
    Returns what each listed, and the names each held at the start."""
    base = make_temp_dir("enumeration")
    extra = "" if bound is None else f"\n[limits]\nmax_listing_bytes_per_connection = {bound}\n"
    running = _start_copyless(base, extra_config=extra)
    server = running.info
    try:
        names = [f"photo-{i:06d}-from-the-holiday.jpg" for i in range(FILES)]
        for folder in ("one", "two"):
            (server.share_path / folder).mkdir()
            for n in names:
                (server.share_path / folder / n).touch()
        smbclient.register_session(server.host, username=server.user, password=server.password,
                                   port=server.port, require_signing=True, auth_protocol="ntlm")
        root = f"\\\\{server.host}\\{server.share}"
        listings = [smbclient.scandir(f"{root}\\{f}", port=server.port) for f in ("one", "two")]
        got: list[list[str]] = [[], []]
        live = [True, True]
        while any(live):
            for i, it in enumerate(listings):
                if not live[i]:
                    continue
                entry = next(it, None)
                if entry is None:
                    live[i] = False
                    continue
                got[i].append(entry.name)
                if i == 1 and len(got[1]) == FILES // 4:
                    (server.share_path / "two" / "zzz-added-meanwhile.jpg").touch()
                    (server.share_path / "two" / names[FILES // 2]).unlink()
        smbclient.reset_connection_cache()
        return got[0], got[1], names
    finally:
        smbclient.reset_connection_cache()
        _stop_copyless(running)
        shutil.rmtree(base, ignore_errors=True)


def test_listings_past_the_bound_are_read_again_and_resume_in_place():
    one, two, names = enumerate_two(BOUND)
    want = [n for n in names if n != names[FILES // 2]] + ["zzz-added-meanwhile.jpg"]
    assert one == names
    assert two == want, f"{len(two)} names listed, {len(want)} expected"


def test_listings_within_the_bound_are_kept():
    one, two, names = enumerate_two(None)
    # The listing taken at the start is kept: the added file is not shown,
    # the removed one is not shown either (each entry is looked at as it
    # goes out).
    assert one == names
    assert two == [n for n in names if n != names[FILES // 2]]
