"""Job spec parsing: defaults, round trip, and one clear error per kind of bad input."""

from __future__ import annotations

import pytest
from vfl.contract.errors import SpecError
from vfl.contract.spec import JobSpec, load_spec, parse_spec_text

GOOD = """
job: credit-demo
parties:
  - id: bank
    role: active
    data: {path: data/guest.csv, format: csv, id: id, label: y}
  - id: shop
    role: passive
    data: {path: data/host.csv, format: csv, id: id}
model:
  source: {out_dim: 16}
  top: {hidden: [32], task: binary}
protocol: split
local_updates: {mode: none}
train: {epochs: 3, batch_size: 256, lr: 0.05, optimizer: adagrad, seed: 0}
validation: {fraction: 0.2, every: 20}
"""


def test_issue_example_parses_with_defaults_and_round_trips() -> None:
    spec = parse_spec_text(GOOD)
    assert spec.active.id == "bank" and [p.id for p in spec.passives] == ["shop"]
    assert spec.model.top.hidden == (32,) and spec.train.optimizer == "adagrad"
    assert JobSpec.from_json(spec.to_json()) == spec


def test_minimal_spec_gets_defaults() -> None:
    spec = parse_spec_text(
        "parties: [{id: a, role: active, data: {dataset: d}}, "
        "{id: b, role: passive, data: {dataset: e}}]"
    )
    assert spec.train.epochs == 3 and spec.validation.fraction == 0.2
    assert spec.protocol == "split" and spec.model.source.out_dim == 16


def test_relative_paths_resolve_against_the_spec_folder(tmp_path) -> None:
    (tmp_path / "job.yaml").write_text(GOOD)
    spec = load_spec(tmp_path / "job.yaml")
    assert spec.active.data.path == str(tmp_path / "data" / "guest.csv")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("job: [unclosed", "not valid YAML"),
        ("- a list", "must be a YAML mapping"),
        (GOOD + "\nfoo: 1\n", "unknown field(s) 'foo'"),
        (GOOD.replace("lr: 0.05", "lr: -1"), "'train.lr'"),
        (GOOD.replace("optimizer: adagrad", "optimizer: rmsprop"), "'train.optimizer'"),
        (GOOD.replace("task: binary", "task: ranking"), "'model.top.task'"),
        (GOOD.replace("epochs: 3", "epochs: three"), "'train.epochs'"),
        (GOOD.replace("role: passive", "role: active"), "exactly one party with role: active"),
        (GOOD.replace("id: shop", "id: bank"), "duplicate ids"),
        (GOOD.replace("protocol: split", "protocol: magic"), "'protocol' must be one of"),
        (GOOD.replace(", label: y", ""), "'data.label' must name its label column"),
        (
            GOOD.replace("format: csv, id: id, label", "format: xlsx, id: id, label"),
            "'parties[0].data.format'",
        ),
        (GOOD.replace("top: {hidden: [32]", "top: {hidden: [0]"), "'model.top.hidden[0]'"),
        (
            GOOD.replace("data: {path: data/host.csv, format: csv, id: id}", "data: {}"),
            "exactly one of 'dataset'",
        ),
        (GOOD.replace("fraction: 0.2", "fraction: 1.5"), "'validation.fraction'"),
        (
            GOOD.replace("train: {", "train: {rate: 1, "),
            "unknown field(s) 'train.rate' in train; allowed: batch_size, checkpoint_every, "
            "epochs, lr, optimizer, seed, timeout_s",
        ),
        (GOOD.replace("lr: 0.05", "lr: true"), "'train.lr' must be a number in (0, 100]"),
        (GOOD.replace("epochs: 3", "epochs: '3'"), "'train.epochs' must be an integer"),
        (
            GOOD.replace("{mode: none}", "{mode: celu, steps: 0}"),
            "'local_updates.steps' must be an integer >= 1",
        ),
        (
            GOOD.replace("{mode: none}", "{mode: fedbcd, schedule: async}"),
            "'local_updates.schedule' must be sync for fedbcd",
        ),
        (GOOD.replace("id: id}", "id: id, label: z}"), "'parties[1].data.label' must be left out"),
        (GOOD + "crypto: {key_bits: 1024}\n", "'crypto.key_bits' is 1024"),
        (GOOD + "crypto: {obfuscators: djn}\n", "'crypto.obfuscators'"),
        (GOOD + "network: {rtt_ms: 5}\n", "'network.bandwidth_mbps' is required"),
        # a bandwidth so small that one envelope's serialisation time overflows a sleep
        (GOOD + "network: {bandwidth_mbps: 1e-300}\n", "'network.bandwidth_mbps' must be"),
        (GOOD + "network: {bandwidth_mbps: .inf}\n", "'network.bandwidth_mbps' must be"),
        (GOOD + "network: {bandwidth_mbps: .nan}\n", "'network.bandwidth_mbps' must be"),
        (GOOD + "network: {bandwidth_mbps: 10, rtt_ms: 1e300}\n", "'network.rtt_ms' must be"),
        (GOOD + "network: {bandwidth_mbps: 10, rtt_ms: -1}\n", "'network.rtt_ms' must be"),
        (GOOD + "network: {bandwidth_mbps: 10, rtt_ms: .nan}\n", "'network.rtt_ms' must be"),
    ],
)
def test_bad_specs_name_the_field(text: str, fragment: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec_text(text)
    assert fragment in str(err.value)


def test_missing_spec_file(tmp_path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")


def test_numbers_that_yaml_reads_as_strings_are_numbers() -> None:
    # YAML 1.1 reads 1e-3 (an exponent, no dot) as the string "1e-3"
    spec = parse_spec_text(
        GOOD.replace("lr: 0.05", "lr: 1e-3").replace("{mode: none}", "{mode: celu, xi: 5e-1}")
        + "network: {bandwidth_mbps: 2e1, rtt_ms: '50'}\n"
    )
    assert spec.train.lr == 0.001 and spec.local_updates.xi == 0.5
    assert spec.network is not None and spec.network.bandwidth_mbps == 20.0
    assert spec.network.rtt_ms == 50.0


def test_schedule_is_async_for_celu_and_sync_for_the_others() -> None:
    def schedule(local_updates: str) -> str:
        return parse_spec_text(GOOD.replace("{mode: none}", local_updates)).local_updates.schedule

    assert (
        schedule("{mode: celu}") == "async" and schedule("{mode: celu, schedule: sync}") == "sync"
    )
    assert schedule("{mode: none}") == schedule("{mode: fedbcd}") == "sync"


def test_empty_sections_and_yaml_booleans() -> None:
    spec = parse_spec_text(
        GOOD.replace("label: y", "label: true").replace("id: id}", "id: id, label: false}")
        + "crypto:\n"
    )
    assert spec.active.data.label == "true" and spec.passives[0].data.label is None
    assert spec.crypto.key_bits == 2048 and spec.crypto.obfuscators == "short"


def test_statistical_obfuscators_are_the_assumption_free_choice() -> None:
    spec = parse_spec_text(GOOD + "crypto: {obfuscators: statistical}\n")
    assert spec.crypto.obfuscators == "statistical"
    assert JobSpec.from_json(spec.to_json()) == spec


def test_a_party_is_named_once_in_what_it_said() -> None:
    from vfl.contract.errors import party_named

    assert party_named("shop", "party 'shop' exposes no dataset 'x'") == (
        "party 'shop' exposes no dataset 'x'"
    )
    assert party_named("shop", "over its limit") == "party 'shop': over its limit"
    assert party_named("shop", "party 'shopping' is down") == (
        "party 'shop': party 'shopping' is down"
    )


def test_a_parquet_file_is_read_as_parquet_without_a_format() -> None:
    from vfl.contract.spec import TableSource

    assert TableSource(path="/data/bank.parquet").format == "parquet"
    assert TableSource(path="/data/bank.PQ").format == "parquet"
    assert TableSource(path="/data/bank.csv").format == "csv"
    assert TableSource(path="/data/bank.parquet", format="csv").format == "csv"


def test_features_select_and_analyze_are_checked() -> None:
    from vfl.contract.errors import SpecError
    from vfl.contract.spec import parse_spec

    base = {
        "parties": [
            {"id": "bank", "role": "active", "data": {"dataset": "d"}},
            {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
        ]
    }
    spec = parse_spec({**base, "features": {"select": {"iv_min": 0.02, "top": 5}}})
    assert spec.features.select is not None and spec.features.bins == 10
    with pytest.raises(SpecError, match="features.select.iv_min"):
        parse_spec({**base, "features": {"select": {}}})
    with pytest.raises(SpecError, match="features.bins"):
        parse_spec({**base, "features": {"bins": 1}})
    with pytest.raises(SpecError, match="binary label"):
        parse_spec({**base, "analyze": True, "model": {"top": {"task": "regression"}}})
