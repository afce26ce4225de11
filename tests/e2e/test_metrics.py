"""Prometheus metrics (`--metrics HOST:PORT`): every daemon of a real blindfl job is
scraped while the job trains, and its round counter rises."""

from __future__ import annotations

import http.client
import re
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from vfl.contract.spec import parse_spec_text
from vfl.local.run import started
from vfl.secure.pki.federation import load_identity

from tests.support.data import FATE
from tests.support.metrics import endpoint, scrape

pytestmark = pytest.mark.subprocess

SPEC = f"""
job: metered
parties:
  - {{id: bank, role: active, data: {{path: {FATE}/breast_hetero_guest.csv, label: y}}}}
  - {{id: shop, role: passive, data: {{path: {FATE}/breast_hetero_host.csv}}}}
protocol: blindfl
crypto: {{key_bits: 512, allow_insecure_test_keys: true}}
model: {{source: {{out_dim: 4}}, top: {{hidden: [8]}}}}
train: {{epochs: 3, batch_size: 64}}
network: {{bandwidth_mbps: 1000, rtt_ms: 40}}
"""
METRICS = ("--metrics", "127.0.0.1:0")
ROUNDS = {
    "coordinator": "vfl_coordinator_rounds_total",
    "party-bank": "vfl_party_rounds_total",
    "party-shop": "vfl_party_rounds_total",
}


def test_every_daemon_counts_rounds_while_a_job_trains(tmp_path: Path) -> None:
    # Prepare
    spec = parse_spec_text(SPEC)
    with started(spec, tmp_path, METRICS, tls=False, coordinator_args=METRICS) as run:
        urls = {d: endpoint(tmp_path, d) for d in ROUNDS}
        seen: dict[str, list[float]] = {d: [] for d in ROUNDS}
        # Execute: scrape every daemon each time the job's progress moves while it trains
        job_id = run.submit()
        for view in run.client.watch(job_id):
            if view.state == "TRAINING" and view.result.round:
                for daemon, url in urls.items():
                    seen[daemon].append(scrape(url).get((ROUNDS[daemon], ()), 0.0))
            if view.state in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
        final = {d: scrape(u) for d, u in urls.items()}
        # with no job left, each party fills its kept pool for the other's key
        warm = {
            (daemon, peer): _until_ready(urls[daemon], peer)
            for daemon, peer in (("party-bank", "shop"), ("party-shop", "bank"))
        }
    # Assert
    assert view.state == "SUCCEEDED", view.reason
    for daemon, values in seen.items():
        assert len(set(values)) >= 2 and values == sorted(values), (daemon, values)
    total = view.result.rounds
    bank, shop = final["party-bank"], final["party-shop"]
    assert bank[("vfl_party_rounds_total", ())] == total
    assert final["coordinator"][("vfl_coordinator_rounds_total", ())] == total
    assert final["coordinator"][("vfl_coordinator_jobs", (("state", "SUCCEEDED"),))] == 1
    sent = bank[("vfl_party_bytes_total", (("direction", "sent"), ("peer", "shop")))]
    assert sent == shop[("vfl_party_bytes_total", (("direction", "received"), ("peer", "bank")))]
    assert bank[("vfl_party_round_seconds_count", ())] == total - 1
    assert bank[("vfl_party_psi_rows_total", ())] == 569
    for party in (bank, shop):
        ops = {
            op: party[("vfl_party_paillier_operations_total", (("op", op),))]
            for op in ("encryptions", "rerandomizations", "decryptions", "products")
        }
        assert all(count > 0 for count in ops.values()), ops
    assert all(count >= 4_096 for count in warm.values()), warm


def _until_ready(url: str, owner: str, timeout_s: float = 60.0) -> float:
    """The obfuscators a daemon keeps for `owner`'s key once its pool is full (the
    default 4,096; or what it holds when `timeout_s` runs out)."""
    name = ("vfl_party_obfuscators_ready", (("key", owner),))
    deadline = time.monotonic() + timeout_s
    while (count := scrape(url).get(name, 0.0)) < 4_096 and time.monotonic() < deadline:
        time.sleep(0.5)
    return count


def test_with_tls_the_metrics_answer_only_a_federation_certificate(tmp_path: Path) -> None:
    # Prepare: the daemons of a TLS federation, each serving metrics (no job needed)
    spec = parse_spec_text(SPEC)
    with started(spec, tmp_path, METRICS, tls=True, coordinator_args=METRICS):
        urls = {
            d: re.search(r"metrics on (\S+)", (tmp_path / f"{d}.log").read_text()) for d in ROUNDS
        }
        assert all(urls.values()), urls
        admin = load_identity(tmp_path / "tls", "admin")
        with_cert = ssl.create_default_context(cafile=str(admin.ca_cert))
        with_cert.check_hostname = False  # the certificates name parties, not 127.0.0.1
        with_cert.load_cert_chain(admin.cert, admin.key)
        without = ssl.create_default_context(cafile=str(admin.ca_cert))
        without.check_hostname = False
        for daemon, found in urls.items():
            url = found.group(1)
            # Execute / Assert: HTTPS with a federation certificate reads them
            assert url.startswith("https://"), (daemon, url)
            with urllib.request.urlopen(url, timeout=10, context=with_cert) as resp:
                assert resp.status == 200 and b"vfl_" in resp.read()
            # no client certificate, or plain HTTP: nothing
            with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
                with urllib.request.urlopen(url, timeout=10, context=without) as resp:
                    resp.read()
            with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
                with urllib.request.urlopen(url.replace("https", "http", 1), timeout=10) as resp:
                    resp.read()
