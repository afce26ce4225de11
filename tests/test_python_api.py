"""The public Python API (`vfl.Client`, `vfl.local_federation`): the notebook session of
docs/usage.md run exactly as written against real daemons, how the client takes a spec
(a dict, a YAML file, a `JobSpec`) and which typed error each mistake raises, and the
sub-packages' public names."""

from __future__ import annotations

import csv
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import vfl
import yaml
from vfl.contract.spec import JobSpec, parse_spec
from vfl.coordinator.server import create_coordinator_server
from vfl.local.federation import _datasets
from vfl.specs import as_spec, prediction_yaml

from tests.support.data import FATE

REPO = Path(__file__).resolve().parent.parent
USAGE = REPO / "docs" / "usage.md"
PACKAGES = [
    "vfl",
    "vfl.contract",
    "vfl.party",
    "vfl.party.inference",
    "vfl.party.state",
    "vfl.party.training",
    "vfl.party.training.split",
    "vfl.party.transport",
    "vfl.coordinator",
    "vfl.coordinator.ui",
    "vfl.celu",
    "vfl.cli",
]


def session_blocks() -> list[str]:
    """The ```python blocks of docs/usage.md's "Python API" section, in order."""
    text = USAGE.read_text()
    assert "\n## Python API\n" in f"\n{text}", "docs/usage.md has no '## Python API' section"
    section = f"\n{text}".split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```$", section, re.S | re.M)


@pytest.mark.subprocess
def test_the_usage_session_runs_against_real_daemons(tmp_path: Path) -> None:
    """The session, top to bottom, in a fresh interpreter in an empty folder: a local
    federation (a coordinator and two party processes with mutual TLS), a split job
    submitted as a dict and followed by a callback, models, a batch prediction, online
    scores and the model's deletion; its own asserts hold and its processes are gone."""
    blocks = session_blocks()
    assert len(blocks) >= 6
    script = tmp_path / "session.py"
    script.write_text("\n\n".join(blocks))
    env = {k: v for k, v in os.environ.items() if not k.startswith("VFL_")}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr}"
    assert "rejected: 'train.epochs' must be an integer" in out
    assert re.search(r"^breast-\w+ TRAINING round \d+/40 loss=", out, re.M)
    assert re.search(r"^SUCCEEDED: 40 rounds in [\d.]+ s, \{.*'auc': 0\.9\d+", out, re.M)
    assert re.search(r"^133 \{'score': [\d.e-]+\} [01] $", out, re.M)
    assert "no-such-id {} None unknown_id" in out
    assert re.search(r"^gone: model breast-\w+ was deleted", out, re.M)
    fed = tmp_path / "federation"
    with (fed / "bank-state" / "predictions" / "scores.csv").open() as fh:
        assert len(list(csv.DictReader(fh))) == 569
    for pid in (fed / "pids").read_text().split():
        with pytest.raises(ProcessLookupError):
            os.kill(int(pid), 0)


SPEC = {
    "job": "breast",
    "protocol": "split",
    "parties": [
        {"id": "bank", "role": "active", "data": {"dataset": "breast"}},
        {"id": "shop", "role": "passive", "data": {"dataset": "breast"}},
    ],
    "train": {"epochs": 1, "lr": 0.05},
}


def with_files(path: str) -> dict:
    """`SPEC` with each party's data given as the file `path` (the bank's labels in y)."""
    bank, shop = SPEC["parties"]
    data = {"path": path}
    return {**SPEC, "parties": [{**bank, "data": {**data, "label": "y"}}, {**shop, "data": data}]}


@pytest.mark.subprocess
def test_a_local_federation_from_a_spec_file_runs_it_in_a_with_block(tmp_path: Path) -> None:
    """`vfl run` as Python: the spec's files become the parties' datasets, and the block's
    end stops every process and removes the temporary folder."""
    path = tmp_path / "job.yaml"
    job = with_files(str(FATE / "breast_hetero_guest.csv"))
    job["parties"][1]["data"] = {"path": str(FATE / "breast_hetero_host.csv")}
    path.write_text(yaml.safe_dump(job))
    federation = vfl.local_federation(path, tls=False)
    with federation as client:
        assert client.tls is None and federation.spec is not None
        result = client.run(federation.spec)
        assert result.succeeded, result.reason
        assert result.rounds > 0 and result.history[-1].round == result.rounds
        analysed = client.analyze(federation.spec)  # WOE and IV of every column
        assert analysed.succeeded and analysed.analysis is not None, analysed.reason
        assert [len(analysed.analysis.party(p)) for p in ("bank", "shop")] == [10, 20]
        assert all(c.iv is not None and c.iv > 0 for c in analysed.analysis.columns)
        # by default the shop's columns go by their positions, without their bins
        shop = analysed.analysis.party("shop")
        assert [c.column for c in shop] == [f"x{j}" for j in range(20)]
        assert all(c.edges is None and c.categories is None for c in shop)
        assert all(c.edges is not None for c in analysed.analysis.party("bank"))
    assert not federation.workdir.exists()
    federation.close()  # again: nothing left to do


def test_a_spec_is_a_dict_a_yaml_file_or_a_jobspec(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    spec = parse_spec(SPEC)
    assert as_spec(SPEC) == as_spec(path) == as_spec(str(path)) == spec
    assert as_spec(spec) is spec
    path.write_text(yaml.safe_dump(with_files("bank.csv")))
    assert as_spec(path).parties[0].data.path == str(tmp_path / "bank.csv")  # beside the file


def test_a_bad_spec_names_its_field_before_anything_is_dialled() -> None:
    client = vfl.Client("127.0.0.1:1")  # nothing listens there: nothing is sent
    with pytest.raises(vfl.SpecError, match=r"'train\.lr'"):
        client.submit({**SPEC, "train": {"lr": -1}})
    with pytest.raises(vfl.SpecError, match=r"unknown field\(s\) 'trian'"):
        client.submit({**SPEC, "trian": {}})
    with pytest.raises(vfl.SpecError, match="'no-such.yaml' does not exist"):
        client.submit("no-such.yaml")
    with pytest.raises(TypeError, match="not int"):
        client.submit(42)  # type: ignore[arg-type]
    with pytest.raises(vfl.SpecError, match="batch_size"):
        client.submit_prediction("m-1", {"bank": "breast"}, batch_size=0)
    client.close()


def test_tls_files_are_checked_when_the_client_is_made(tmp_path: Path) -> None:
    with pytest.raises(vfl.CertError, match="ca.crt is missing"):
        vfl.Client("127.0.0.1:1", tls=tmp_path)


def test_an_unreachable_coordinator_names_the_fix() -> None:
    with vfl.Client("127.0.0.1:1", timeout=5) as client:
        with pytest.raises(vfl.CoordinatorUnavailable, match="is the daemon running"):
            client.jobs()


@pytest.mark.grpc
def test_typed_answers_and_errors_from_a_real_coordinator(tmp_path: Path) -> None:
    """Each form of a spec reaches the coordinator as the same job; its refusals come
    back as typed errors. No party runs: the jobs fail at launch, naming the party."""
    # no party will come: fail at launch instead of waiting for them to register
    server = create_coordinator_server(
        str(tmp_path / "jobs.sqlite"), "127.0.0.1:0", register_wait_s=0
    )
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    try:
        with vfl.Client(f"127.0.0.1:{server.port}") as client:
            ids = [client.submit(s) for s in (SPEC, path, parse_spec(SPEC))]
            results = [client.wait(job_id) for job_id in ids]
            assert [r.state for r in results] == ["FAILED"] * 3
            assert all("bank" in r.reason for r in results), results[0].reason
            assert [j.job_id for j in client.jobs()] == ids
            specs = {JobSpec.from_json(server.lifecycle.store.get(i).spec_json) for i in ids}
            assert len(specs) == 1
            _refusals(client, ids[0])
            # a registered party that does not expose the dataset: refused at submit
            server.lifecycle.store.register_party("bank", "127.0.0.1:1", ["loans"])
            with pytest.raises(vfl.SpecError, match="party 'bank' exposes no dataset") as info:
                client.submit(SPEC)
            assert "(it exposes: loans)" in str(info.value)
    finally:
        server.stop(0)


def _refusals(client: vfl.Client, job_id: str) -> None:
    with pytest.raises(vfl.SpecError, match="name their data by 'path'"):
        client.submit(with_files("x.csv"))
    with pytest.raises(vfl.UnknownJob, match="no job 'j-nope'"):
        client.wait("j-nope")
    with pytest.raises(vfl.UnknownJob):
        list(client.watch("j-nope"))
    with pytest.raises(vfl.UnknownModel):
        client.model("j-nope")
    with pytest.raises(vfl.UnknownModel, match="no model j-nope; list them with `vfl models`"):
        client.score("j-nope", ["1"])
    with pytest.raises(vfl.CoordinatorError, match="left no model"):
        client.predict(job_id, {"bank": "breast", "shop": "breast"})  # it left no model
    assert client.models() == []
    assert client.cancel(job_id) == "FAILED"


def test_a_prediction_spec_from_arguments_over_a_file(tmp_path: Path) -> None:
    base = tmp_path / "predict.yaml"
    base.write_text("model: m-1\ndata: {bank: a, shop: b}\nout: first\n")
    text = prediction_yaml(None, {"shop": "c"}, out="second", base=base)
    assert yaml.safe_load(text) == {
        "model": "m-1",
        "data": {"bank": "a", "shop": "c"},
        "out": "second",
    }
    assert yaml.safe_load(prediction_yaml("m-2", {"bank": "a"}, batch_size=64)) == {
        "model": "m-2",
        "data": {"bank": "a"},
        "batch_size": 64,
    }
    with pytest.raises(vfl.SpecError, match="'data'"):
        prediction_yaml("m-1")
    base.write_text("- a list\n")
    with pytest.raises(vfl.SpecError, match="not a YAML mapping"):
        prediction_yaml("m-1", {"bank": "a"}, base=base)


def test_a_local_federation_takes_datasets_or_a_spec_with_files(
    tmp_path: Path, monkeypatch
) -> None:
    """Which datasets each party would expose (no process starts)."""
    monkeypatch.chdir(tmp_path)
    spec, datasets = _datasets({"bank": {"breast": {"path": "bank.csv", "label": "y"}}})
    assert spec is None and datasets["bank"]["breast"].path == str(tmp_path / "bank.csv")
    assert datasets["bank"]["breast"].label == "y"
    guest = str(FATE / "breast_hetero_guest.csv")
    spec, datasets = _datasets(with_files(guest))
    assert spec is not None and {p.data.dataset for p in spec.parties} == {"data"}
    assert datasets["shop"]["data"].path == guest
    with pytest.raises(vfl.SpecError, match=r"party 'bank', dataset 'x': .*'format'"):
        _datasets({"bank": {"x": {"path": "a.csv", "format": "xlsx"}}})
    with pytest.raises(vfl.SpecError, match="names a dataset"):
        _datasets(SPEC)


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_exports_its_public_names(package: str) -> None:
    """Every name of a package's `__all__` is there (loaded on first use where lazy), and
    an unknown one is an AttributeError."""
    module = importlib.import_module(package)
    assert module.__all__ and len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_importing_vfl_loads_neither_grpc_nor_torch() -> None:
    code = "import sys, vfl, vfl.contract\nprint('grpc' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
