#!/bin/sh
# Check the EFA installer's signature before anything in the tarball runs:
#
#   verify_efa_installer.sh TARBALL SIGNATURE PUBLIC_KEY FINGERPRINT
#
# Succeeds only if SIGNATURE is a good signature of TARBALL by the key whose primary fingerprint is FINGERPRINT
# (spaces allowed, as AWS prints it). The key file comes from the same server as the tarball, so it proves nothing
# by itself: the fingerprint, which AWS publishes in the EC2 user guide, is what is trusted. gpgv checks the
# signature with no keyring or agent of its own; gpg only converts the key file.
set -eu

if [ "$#" -ne 4 ]; then
    echo "usage: $0 TARBALL SIGNATURE PUBLIC_KEY FINGERPRINT" >&2
    exit 2
fi
tarball=$1
signature=$2
key=$3
expected=$(printf '%s' "$4" | tr -d ' ' | tr 'abcdef' 'ABCDEF')
case $expected in
    *[!0-9A-F]* | "")
        echo "error: fingerprint '$4' is not hexadecimal" >&2
        exit 2
        ;;
esac
if [ "${#expected}" -ne 40 ]; then
    echo "error: fingerprint '$4' has ${#expected} hex digits, not 40" >&2
    exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# gpgv reads binary keyrings; AWS publishes the key ASCII-armored.
if head -c 5 "$key" | grep -q -- '-----'; then
    gpg --homedir "$work" --batch --quiet --dearmor --output "$work/keyring.gpg" "$key"
else
    cp "$key" "$work/keyring.gpg"
fi

if ! gpgv --homedir "$work" --keyring "$work/keyring.gpg" --status-fd 3 "$signature" "$tarball" \
        3>"$work/status" 2>"$work/gpgv.log"; then
    cat "$work/gpgv.log" >&2
    echo "error: $signature is not a good signature of $tarball by a key in $key" >&2
    exit 1
fi
# VALIDSIG's last field is the primary key's fingerprint (GnuPG's doc/DETAILS): the signature must be that key's,
# not any other key the file may carry.
if ! grep -Eq "^\[GNUPG:\] VALIDSIG .* ${expected}\$" "$work/status"; then
    grep '^\[GNUPG:\] VALIDSIG' "$work/status" >&2 || true
    echo "error: $tarball is signed, but not by the key with fingerprint $expected" >&2
    exit 1
fi
echo "verified: $tarball is signed by $expected"
