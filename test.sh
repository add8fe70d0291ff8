#!/usr/bin/env bash
# Installs what the tests need (when missing), builds copyless, then runs the
# unit tests, the integration tests, smbtorture and a short pass of every
# fuzz target. Exits non-zero on any failure.
#
#   ./test.sh                              test copyless
#   COPYLESS_TEST_SERVER=samba ./test.sh   check the integration tests against smbd
set -euo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive

log() { printf '\n==> %s\n' "$*"; }

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -E "$@"
    else
        echo "test.sh: need root (or sudo) to run: $*" >&2
        exit 1
    fi
}

install_system_packages() {
    local packages=()
    command -v smbclient >/dev/null 2>&1 || packages+=(smbclient)
    command -v smbtorture >/dev/null 2>&1 || packages+=(samba-testsuite)
    # systemd-analyze checks the unit file (tests/test_systemd.py).
    command -v systemd-analyze >/dev/null 2>&1 || packages+=(systemd)
    # The throwaway KDC of the Kerberos conformance tests.
    [ -x /usr/sbin/krb5kdc ] || packages+=(krb5-kdc krb5-admin-server krb5-user)
    command -v python3 >/dev/null 2>&1 || packages+=(python3)
    # The dashboard test's headless browser.
    command -v chromium >/dev/null 2>&1 || packages+=(chromium)
    # The network namespaces of the discovery tests (ip, and ss).
    command -v ip >/dev/null 2>&1 && command -v ss >/dev/null 2>&1 || packages+=(iproute2)
    python3 -m pip --version >/dev/null 2>&1 || packages+=(python3-pip)
    # A real Samba's users to import (tests/test_samba_import.py), and a
    # real Samba with the modules a NAS's smb.conf names, to compare with
    # (tests/test_samba_parity.py).
    command -v pdbedit >/dev/null 2>&1 || packages+=(samba)
    [ -e /usr/lib/x86_64-linux-gnu/samba/vfs/recycle.so ] ||
        [ -n "$(find /usr/lib -path '*/samba/vfs/recycle.so' -print -quit 2>/dev/null)" ] ||
        packages+=(samba-vfs-modules)
    # fail2ban-regex checks the filter in dist/fail2ban (tests/test_logons.py).
    command -v fail2ban-regex >/dev/null 2>&1 || packages+=(fail2ban)
    # The loop-mounted filesystems that clone blocks (conformance/loopfs).
    command -v mkfs.btrfs >/dev/null 2>&1 || packages+=(btrfs-progs)
    command -v mkfs.xfs >/dev/null 2>&1 || packages+=(xfsprogs)
    if [ "${COPYLESS_TEST_SERVER:-copyless}" = samba ]; then
        command -v smbd >/dev/null 2>&1 || [ -x /usr/sbin/smbd ] || packages+=(samba)
    fi
    if ! command -v cargo >/dev/null 2>&1 && ! [ -x "$HOME/.cargo/bin/cargo" ]; then
        command -v curl >/dev/null 2>&1 || packages+=(curl ca-certificates)
    fi
    command -v cc >/dev/null 2>&1 || packages+=(build-essential)
    # The slow filesystem of tests/slowfs.py (fusepy loads libfuse 2).
    if ! ldconfig -p | grep -q 'libfuse\.so\.2'; then
        if apt-cache show libfuse2t64 >/dev/null 2>&1; then
            packages+=(libfuse2t64)
        else
            packages+=(libfuse2)
        fi
    fi
    if [ "${#packages[@]}" -gt 0 ]; then
        log "installing ${packages[*]}"
        as_root apt-get update -q
        as_root apt-get install -y -q --no-install-recommends "${packages[@]}"
    fi
}

install_rust() {
    if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        # Debian's own cargo is older than the workspace's rust-version.
        log "installing Rust with rustup"
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
}

install_python_packages() {
    if python3 -c 'import smbprotocol, smbclient, pytest, prometheus_client, fuse, websocket, zeroconf' >/dev/null 2>&1; then
        return
    fi
    # zeroconf: the DNS-SD resolver of the discovery tests.
    log "installing smbprotocol, pytest, prometheus-client, fusepy, websocket-client and zeroconf"
    # Debian marks its system Python as externally managed (PEP 668).
    python3 -m pip install -q smbprotocol pytest prometheus-client fusepy websocket-client zeroconf ||
        python3 -m pip install -q --break-system-packages smbprotocol pytest prometheus-client fusepy websocket-client zeroconf
}

install_cargo_fuzz() {
    if ! cargo fuzz --version >/dev/null 2>&1; then
        log "installing cargo-fuzz"
        cargo install cargo-fuzz --version 0.13.2 --locked
    fi
}

install_cargo_deb() {
    if ! cargo deb --version >/dev/null 2>&1; then
        log "installing cargo-deb"
        cargo install cargo-deb --version 3.8.0 --locked
    fi
}

install_system_packages
install_rust
install_python_packages
install_cargo_fuzz
install_cargo_deb

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy"
cargo clippy --all-targets -- -D warnings

log "fuzz crate: fmt, clippy, harness tests"
(cd fuzz && cargo fmt -- --check && cargo clippy --all-targets -- -D warnings && cargo test -q)

log "cargo build --release"
cargo build --release

log "cargo test --workspace --release"
cargo test --workspace --release

# Every test runs on both engines: first on the one `engine = "auto"`
# picks (io_uring where the kernel allows it), then on the threaded one.
log "integration tests (server: ${COPYLESS_TEST_SERVER:-copyless}, engine auto)"
COPYLESS_ENGINE=auto python3 -m pytest -v tests/

if [ "${COPYLESS_TEST_SERVER:-copyless}" = copyless ]; then
    # On the engine auto picks, every test of smbtorture's smb2 family
    # that passes here (with the setups Samba's selftest gives them) and
    # the tier-1 tests beyond the family; the other runs, tier 1.
    log "smbtorture conformance (conformance/family-passing.txt and tier1.txt), engine auto"
    COPYLESS_ENGINE=auto ./conformance/run conformance/family-passing.txt conformance/tier1.txt

    # The runs above keep their shares in memory (tmpfs); a NAS keeps
    # them on a disk's filesystem, where the io_uring engine makes most
    # filesystem calls off its loop. So once more there (/var/tmp: the
    # system disk's, open to the test users).
    log "smbtorture conformance, engine auto, shares on /var/tmp's filesystem"
    scratch=$(mktemp -d /var/tmp/copyless-conformance.XXXXXX)
    chmod 755 "$scratch"
    COPYLESS_SCRATCH="$scratch" COPYLESS_ENGINE=auto ./conformance/run
    rm -rf "$scratch"

    # Server-side copy, sparse files and clones where blocks can be
    # shared, and compression: fresh btrfs and XFS images, loop-mounted.
    log "smbtorture conformance (conformance/clones.txt, btrfs.txt), engine auto, shares on btrfs"
    COPYLESS_ENGINE=auto as_root ./conformance/loopfs btrfs \
        ./conformance/run conformance/clones.txt conformance/btrfs.txt
    log "smbtorture conformance (conformance/clones.txt), engine auto, shares on XFS"
    COPYLESS_ENGINE=auto as_root ./conformance/loopfs xfs ./conformance/run conformance/clones.txt

    log "integration tests and conformance again, engine threads"
    COPYLESS_ENGINE=threads python3 -m pytest -q tests/
    COPYLESS_ENGINE=threads ./conformance/run

    log "fuzz targets: replay each corpus, then fuzz each briefly"
    fuzz/run check 20
fi
