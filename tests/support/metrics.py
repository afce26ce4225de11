"""A daemon's Prometheus metrics (`--metrics HOST:PORT`), read as its operator would: the
address it printed in its log, and one scrape as {(name, labels): value}."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def endpoint(workdir: Path, daemon: str) -> str:
    """The metrics URL a daemon printed when it started (it bound port 0)."""
    found = re.search(r"metrics on (https?://\S+)", (workdir / f"{daemon}.log").read_text())
    assert found, f"{daemon} printed no metrics address"
    return found.group(1)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
