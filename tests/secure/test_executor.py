"""The executor seam with its local engine: the block functions give what the in-process
Paillier code gives, and decryptions and products spread over a real process pool give
the same integers. (The Ray engine: tests/e2e/test_ray_executor.py.)"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from party.config import parse_party_config
from party.errors import ConfigError as PartyConfigError
from secure.errors import ConfigError, ExecutorError
from secure.executor import ComputeConfig, LocalExecutor, RayExecutor, make_executor
from secure.paillier.blocks import (
    blob,
    decrypt_block,
    plaintexts,
    rerandomize_block,
    width_of,
)
from secure.paillier.cipher_matmul import CipherMatmul
from secure.paillier.engine import Paillier


@pytest.fixture(scope="module")
def he(test_keys):
    kp = test_keys["B"]
    return Paillier(kp.public, kp.private, threads=1)


@pytest.fixture(scope="module")
def pool():
    executor = LocalExecutor(workers=2, min_block=4)
    yield executor
    executor.close()


def test_blocks_decrypt_and_rerandomize_like_the_engine(he) -> None:
    values = [0, 1, -1, 2**60, -(2**60), 12345]
    cts = he.encrypt(values)
    width = width_of(he.pk.nsquare)
    assert plaintexts(decrypt_block(he.sk, blob(cts, width)), he.pk.n) == values
    fresh = rerandomize_block(he.pk, blob(cts, width))
    assert len(fresh) == len(cts) * width
    again = [int.from_bytes(fresh[i : i + width], "big") for i in range(0, len(fresh), width)]
    assert set(again).isdisjoint(int(c) for c in cts)  # new randomness ...
    assert he.decrypt([type(cts[0])(c) for c in again]) == values  # ... same plaintexts


def test_decryption_on_a_process_pool_equals_the_threads(he, pool) -> None:
    values = list(range(-20, 21))
    cts = he.encrypt(values)
    spread = Paillier(he.pk, he.sk, he.pool, threads=1, executor=pool)
    before = pool.tasks
    assert spread.decrypt(cts) == he.decrypt(cts) == values
    assert pool.tasks - before == 2  # 41 ciphertexts, 2 slots of >= 4: two blocks
    assert spread.decrypt(cts[:7]) == values[:7]  # under 2 x min_block: in this process


def test_products_on_a_process_pool_equal_the_in_process_ones(he, pool) -> None:
    rng = np.random.default_rng(1)
    exps = sp.random(5, 40, density=0.5, random_state=2, format="csr", dtype=np.float64)
    exps.data = rng.integers(-300, 300, size=exps.nnz).astype(np.float64)
    rows = [he.encrypt([int(v), -int(v)]) for v in rng.integers(-99, 99, size=40)]
    nsq = he.pk.nsquare
    alone = CipherMatmul(workers=1).matmul(exps, rows, nsq, 2)
    before = pool.tasks
    spread = CipherMatmul(parallel_min_terms=1, executor=pool).matmul(exps, rows, nsq, 2)
    assert pool.tasks - before == 4  # 2 blocks x 2 columns
    assert [he.decrypt(r) for r in spread] == [he.decrypt(r) for r in alone]


def test_compute_config_names_the_bad_field() -> None:
    with pytest.raises(ConfigError, match="compute.executor must be one of"):
        ComputeConfig(executor="spark")
    with pytest.raises(ConfigError, match="needs compute.address"):
        ComputeConfig(executor="ray")
    with pytest.raises(ConfigError, match="min_block must be >= 1"):
        ComputeConfig(min_block=0)
    assert isinstance(make_executor(ComputeConfig(workers=1)), LocalExecutor)


def test_party_config_reads_compute(tmp_path) -> None:
    config = parse_party_config({"party": "bank", "compute": {"min_block": 64}}, tmp_path)
    assert config.compute == ComputeConfig(min_block=64)
    assert parse_party_config({"party": "bank"}, tmp_path).compute == ComputeConfig()
    with pytest.raises(PartyConfigError, match=r"unknown field\(s\) \['cores'\] under 'compute'"):
        parse_party_config({"party": "bank", "compute": {"cores": 4}}, tmp_path)
    with pytest.raises(PartyConfigError, match="needs compute.address"):
        parse_party_config({"party": "bank", "compute": {"executor": "ray"}}, tmp_path)


def test_a_config_asking_for_ray_without_ray_says_how_to_install_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets without Ray
    raw = {"party": "bank", "compute": {"executor": "ray", "address": "10.0.0.5:6379"}}
    with pytest.raises(PartyConfigError, match=r'pip install -e "\.\[ray\]"'):
        parse_party_config(raw, tmp_path)


def test_an_unreachable_cluster_is_a_named_error_at_once() -> None:
    pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[ray]")')
    with pytest.raises(ExecutorError, match="Ray cluster .* cannot be reached"):
        RayExecutor("127.0.0.1:1").connect()  # port 1: nothing listens


def test_nothing_imports_ray_unless_a_config_asks_for_it() -> None:
    code = (
        "import sys; sys.modules['ray'] = None\n"  # `import ray` would fail
        "import secure.executor, secure.source_layers.common, party.daemon, party.config\n"
        "from secure.executor import ComputeConfig, make_executor\n"
        "make_executor(ComputeConfig(workers=1)).close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
