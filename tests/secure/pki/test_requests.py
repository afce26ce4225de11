"""Certificates between separate organisations: a request out, a certificate back, the key
stays; and a daemon's identity switching to new files (`IdentityWatch`)."""

from __future__ import annotations

import base64
import datetime as dt
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from vfl.secure.pki.certs import CertError, PartyFiles, init_ca, verify_party_cert
from vfl.secure.pki.federation import load_identity
from vfl.secure.pki.requests import request, sign
from vfl.secure.pki.rotation import IdentityWatch

REPO = Path(__file__).resolve().parents[3]
DER = Encoding.DER


@pytest.fixture
def ca_dir(tmp_path: Path) -> Path:
    init_ca(tmp_path / "ca")
    return tmp_path / "ca"


def test_request_then_sign_makes_a_tls_folder_without_moving_the_key(
    ca_dir: Path, tmp_path: Path
) -> None:
    # Prepare
    org = tmp_path / "plant"
    files = request(org, "plant", ("plant.example.org", "10.0.0.7"))
    key = files.key.read_bytes()
    # Execute
    signed = sign(ca_dir, files.csr)
    # Assert
    assert stat.S_IMODE(files.key.stat().st_mode) == 0o600
    assert stat.S_IMODE(org.stat().st_mode) == 0o700
    assert not list(ca_dir.glob("plant*")), "the CA keeps no copy of anything of the party"
    assert files.key.read_bytes() == key and b"PRIVATE" not in files.csr.read_bytes()
    assert (signed.cert, signed.ca_cert) == (org / "plant.crt", org / "ca.crt")
    assert load_identity(org, "plant").key == files.key
    cert = x509.load_pem_x509_certificate(signed.cert.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["plant", "localhost", "plant.example.org"]
    assert signed.hosts == ("plant", "localhost", "127.0.0.1", "plant.example.org", "10.0.0.7")
    assert verify_party_cert(signed.cert.read_bytes(), (ca_dir / "ca.crt").read_bytes()) == "plant"


def test_sign_writes_where_asked_and_renews_the_same_key(ca_dir: Path, tmp_path: Path) -> None:
    files = request(tmp_path / "org", "drive")
    first = sign(ca_dir, files.csr, out=tmp_path / "back", days=1)
    second = sign(ca_dir, files.csr, days=30)
    assert first.cert == tmp_path / "back" / "drive.crt" and second.not_after > first.not_after
    one, two = (x509.load_pem_x509_certificate(p.read_bytes()) for p in (first.cert, second.cert))
    assert one.public_key() == two.public_key() and one.serial_number != two.serial_number


def test_request_keeps_an_existing_key_unless_forced(tmp_path: Path) -> None:
    request(tmp_path, "cooling")
    with pytest.raises(CertError, match="already exists; send cooling.csr to the CA again"):
        request(tmp_path, "cooling")
    key = (tmp_path / "cooling.key").read_bytes()
    assert request(tmp_path, "cooling", force=True).key.read_bytes() != key


@pytest.mark.parametrize("bad", ["", "ca", "-x", "a b"])
def test_request_rejects_bad_party_ids(tmp_path: Path, bad: str) -> None:
    with pytest.raises(CertError, match="invalid party id"):
        request(tmp_path, bad)


def test_sign_refuses_what_is_not_a_valid_request(ca_dir: Path, tmp_path: Path) -> None:
    files = request(tmp_path / "org", "plant")
    with pytest.raises(CertError, match="is not a PEM certificate signing request"):
        sign(ca_dir, files.key)
    with pytest.raises(CertError, match="does not exist; the organisation makes it"):
        sign(ca_dir, tmp_path / "none.csr")
    with pytest.raises(CertError, match="no CA in"):
        sign(tmp_path / "no-ca", files.csr)
    der = bytearray(x509.load_pem_x509_csr(files.csr.read_bytes()).public_bytes(DER))
    der[-1] ^= 1  # the last byte of the signature
    (tmp_path / "bad.csr").write_bytes(_pem("CERTIFICATE REQUEST", bytes(der)))
    with pytest.raises(CertError, match="signature does not verify; ask for a new one"):
        sign(ca_dir, tmp_path / "bad.csr")
    with pytest.raises(CertError, match="must end in the future"):
        sign(ca_dir, files.csr, not_after=dt.datetime.now(dt.timezone.utc))


def test_watch_switches_only_to_a_whole_valid_set(ca_dir: Path, tmp_path: Path) -> None:
    # Prepare: a running identity, then a renewal with a new key arriving file by file
    org = tmp_path / "plant"
    sign(ca_dir, request(org, "plant").csr)
    watch = IdentityWatch(load_identity(org, "plant"))
    before = watch.current()
    request(org, "plant", force=True)  # the new key first: no matching certificate yet
    _touch_later(org / "plant.key")
    # Execute / Assert: the half-replaced set is not used, the whole one is
    assert watch.current() == before and watch.generation == 0
    sign(ca_dir, org / "plant.csr")
    _touch_later(org / "plant.crt")
    after = watch.current()
    assert watch.generation == 1 and after.cert != before.cert and after.key != before.key
    assert watch.expired_on() is None


def test_watch_keeps_its_set_when_the_new_one_is_expired_or_another_party(
    ca_dir: Path, tmp_path: Path
) -> None:
    org = tmp_path / "plant"
    sign(ca_dir, request(org, "plant").csr)
    watch = IdentityWatch(load_identity(org, "plant"))
    good = watch.current()
    other = tmp_path / "drive"
    sign(ca_dir, request(other, "drive").csr)
    for name in ("plant.crt", "plant.key"):
        (org / name).write_bytes((other / name.replace("plant", "drive")).read_bytes())
    _touch_later(org / "plant.crt")
    assert watch.current() == good and watch.generation == 0


def test_cli_request_and_sign_between_folders(ca_dir: Path, tmp_path: Path) -> None:
    org = tmp_path / "org"
    org.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def vfl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "vfl.cli.main", "certs", *args]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=60)

    made = vfl("request", "--party", "admin", cwd=org)
    assert made.returncode == 0 and "send it to the CA operator" in made.stdout
    signed = vfl("sign", str(ca_dir), str(org / "admin.csr"), cwd=tmp_path)
    assert signed.returncode == 0 and "hand back" in signed.stdout
    assert load_identity(org, "admin") == PartyFiles(
        org / "ca.crt", org / "admin.crt", org / "admin.key"
    )
    again = vfl("request", "--party", "admin", "--dir", str(org), cwd=tmp_path)
    assert again.returncode == 2 and "--force for a new key" in again.stderr


def _pem(label: str, der: bytes) -> bytes:
    body = base64.encodebytes(der).decode().replace("\n", "")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----", ""]).encode()


def _touch_later(path: Path) -> None:
    """Move a file's mtime forward, as a copy a moment later would (coarse clocks)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
