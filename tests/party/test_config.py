"""The party config: its datasets are `TableSource`s, with one set of defaults and errors
that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from vfl.contract.spec import TableSource
from vfl.party.config import ScoringLimits, load_party_config, parse_party_config
from vfl.party.errors import ConfigError


def test_datasets_get_defaults_by_format_and_resolve_paths() -> None:
    raw = {
        "party": "bank",
        "datasets": {
            "breast": {"path": "data/guest.csv", "label": "y"},
            "a9a": {"path": "/abs/a9a.guest", "format": "libsvm", "label": True},
        },
    }
    config = parse_party_config(raw, Path("/configs"))
    assert config.datasets == {
        "breast": TableSource(path="/configs/data/guest.csv", id="id", label="y"),
        "a9a": TableSource(path="/abs/a9a.guest", format="libsvm", id="auto", label="true"),
    }
    assert config.datasets["breast"].format == "csv" and config.datasets["a9a"].categorical == ()


@pytest.mark.parametrize(
    ("dataset", "fragment"),
    [
        ({"format": "csv"}, "'datasets.d.path' is required"),
        (
            {"path": "x", "format": "xlsx"},
            "'datasets.d.format' must be one of csv, parquet, libsvm",
        ),
        (
            {"path": "x", "colour": "red"},
            "unknown field(s) 'datasets.d.colour' in datasets.d; allowed: categorical, columns, "
            "format, id, label, password_env, password_file, path, preprocess, query, serve, "
            "table, url",
        ),
        ("x.csv", "'datasets.d' must be a mapping"),
    ],
)
def test_bad_datasets_name_the_field(dataset: object, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_party_config({"party": "bank", "datasets": {"d": dataset}}, Path("."))
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("colour: red\n", "unknown top-level field(s) ['colour']"),
        ("compute: {executor: gpu}\n", "compute.executor must be one of"),
        ("compute: {min_block: 3}\n", "compute.min_block"),
        ("scoring: {threads: 0}\n", "'scoring.threads' must be an integer in [1, 4096]; got 0"),
        ("scoring: {queue: true}\n", "'scoring.queue' must be an integer in [1, 4096]"),
        ("scoring: {deadline_s: 0}\n", "'scoring.deadline_s'"),
        ("scoring: {deadline_s: fast}\n", "'scoring.deadline_s'"),
        ("scoring: {depth: 3}\n", "unknown field(s) 'scoring.depth' in scoring"),
        ("stability: {share: all}\n", "'stability.share' must be one of counts, columns, names"),
        ("stability: names\n", "'stability' must be a mapping {share: counts | columns | names}"),
        ("datasets: {d: {format: csv}}\n", "'datasets.d.path' is required"),
        ("limits: {peer_streams: 0}\n", "'limits.peer_streams' must be an integer in [1, 1024]"),
        (
            "limits: {max_envelope_mb: 600, mailbox_mb: 512}\n",
            "mailbox_mb (512) must be at least max_envelope_mb (600)",
        ),
    ],
)
def test_a_config_files_errors_name_the_file_and_the_field(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "bank.yaml"
    path.write_text("party: bank\n" + text)
    with pytest.raises(ConfigError) as err:
        load_party_config(path)
    assert str(err.value).startswith(f"party config '{path}': ") and fragment in str(err.value)


def test_scoring_limits_default_and_parse(tmp_path: Path) -> None:
    path = tmp_path / "bank.yaml"
    path.write_text("party: bank\n")
    assert load_party_config(path).scoring == ScoringLimits(deadline_s=1, threads=1024, queue=1024)
    path.write_text("party: bank\nscoring: {threads: 8, queue: 4, deadline_s: 2}\n")
    assert load_party_config(path).scoring == ScoringLimits(deadline_s=2.0, threads=8, queue=4)


def test_stability_shares_counts_unless_the_config_says_more(tmp_path: Path) -> None:
    path = tmp_path / "bank.yaml"
    path.write_text("party: bank\n")
    assert load_party_config(path).stability.share == "counts"
    path.write_text("party: bank\nstability: {share: names}\n")
    assert load_party_config(path).stability.share == "names"
