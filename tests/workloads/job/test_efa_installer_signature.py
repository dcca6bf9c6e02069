"""docker/verify_efa_installer.sh, the image's check of the EFA installer's GPG signature, run for real with gpg and
gpgv on a stand-in tarball signed by two throwaway test keys (efa_signature/: public keys, signatures and their
fingerprints only); and the Dockerfile runs it on the download, with AWS's fingerprint, before extracting it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from stack.paths import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "docker" / "verify_efa_installer.sh"
FIXTURES = Path(__file__).parent / "efa_signature"
TARBALL = FIXTURES / "installer.tar.gz"
FINGERPRINT_A, FINGERPRINT_B = (FIXTURES / "fingerprints.txt").read_text().split()
# The EFA installer's signing key as AWS publishes it (EC2 user guide, "Get started with EFA and NCCL", step 5:
# "Verify the GPG key's fingerprint").
AWS_EFA_KEY_FINGERPRINT = "4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC"
DOCKERFILE = (PROJECT_ROOT / "docker" / "Dockerfile").read_text()


@pytest.fixture(autouse=True, scope="module")
def gnupg() -> None:
    missing = [tool for tool in ("gpg", "gpgv") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not installed: apt-get install gpg gpgv (.ci/run does)", pytrace=False)


def verify(tarball: Path, signature: str, key: str, fingerprint: str) -> subprocess.CompletedProcess[str]:
    command = [str(SCRIPT), str(tarball), str(FIXTURES / signature), str(FIXTURES / key), fingerprint]
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


def test_a_good_signature_by_the_expected_key_passes() -> None:
    result = verify(TARBALL, "installer.tar.gz.sig-a", "key-a.asc", FINGERPRINT_A)
    assert result.returncode == 0, result.stderr
    assert f"signed by {FINGERPRINT_A}" in result.stdout


def test_the_fingerprint_may_be_written_as_aws_prints_it() -> None:
    spaced = " ".join(FINGERPRINT_A[i : i + 4] for i in range(0, 40, 4)).lower()
    assert verify(TARBALL, "installer.tar.gz.sig-a", "key-a.asc", spaced).returncode == 0


def test_a_changed_tarball_fails(tmp_path: Path) -> None:
    changed = tmp_path / TARBALL.name
    changed.write_bytes(TARBALL.read_bytes() + b"\0")
    result = verify(changed, "installer.tar.gz.sig-a", "key-a.asc", FINGERPRINT_A)
    assert result.returncode == 1
    assert "is not a good signature" in result.stderr


def test_a_signature_by_another_key_in_the_key_file_fails() -> None:
    # Whoever can replace the tarball can replace the key file next to it: only the pinned fingerprint counts.
    result = verify(TARBALL, "installer.tar.gz.sig-b", "keys-a-and-b.asc", FINGERPRINT_A)
    assert result.returncode == 1
    assert f"not by the key with fingerprint {FINGERPRINT_A}" in result.stderr


def test_a_key_file_without_the_signing_key_fails() -> None:
    assert verify(TARBALL, "installer.tar.gz.sig-b", "key-a.asc", FINGERPRINT_B).returncode == 1


@pytest.mark.parametrize("fingerprint", ["", "not-hex", FINGERPRINT_A[:-1]])
def test_a_malformed_fingerprint_is_refused(fingerprint: str) -> None:
    assert verify(TARBALL, "installer.tar.gz.sig-a", "key-a.asc", fingerprint).returncode == 2


def efa_run_step() -> str:
    """The Dockerfile's RUN instruction that downloads and installs the EFA software, joined into one line."""
    (step,) = [s for s in re.split(r"\n(?=[A-Z]+ )", DOCKERFILE) if s.startswith("RUN ") and "efa_installer.sh" in s]
    return " ".join(step.replace("\\\n", " ").split())


def test_the_image_checks_the_download_before_extracting_it() -> None:
    step = efa_run_step()
    verified = re.search(r"verify_efa_installer\.sh (\S+) (\S+) (\S+) (\S+)", step)
    assert verified, "the EFA step does not run verify_efa_installer.sh"
    tarball, signature, key, fingerprint = verified.groups()
    assert (signature, key) == (f"{tarball}.sig", "aws-efa-installer.key")
    assert fingerprint.replace('"', "") == AWS_EFA_KEY_FINGERPRINT.replace(" ", "")
    assert step.index("verify_efa_installer.sh") < step.index(f"tar -xf {tarball}")
    for name in ("aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz.sig", "aws-efa-installer.key"):
        assert f"https://efa-installer.amazonaws.com/{name}" in step
