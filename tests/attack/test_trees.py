"""The tree attacks on real recorded views of small tree jobs (parties as threads, every
view recorded, the wire audit on; secureboost with small Okamoto-Uchiyama test keys):
the gradient sign gives split's labels away and reads nothing from secureboost's
ciphertexts, the instance space beats its baseline under both, the active party orders a
passive party's rows by its columns, and the peers' mitigations change what they say
they change."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from vfl.attack.harness import AT_CHANCE, LEAKS
from vfl.attack.order import chains, interval_ranks
from vfl.attack.trees import attacks, instance_groups, propagate
from vfl.contract.spec import JobSpec, parse_spec

from tests.support.attack_runs import recorded_run, synthetic_tables

ROWS = 2000
TEST_KEYS = {"key_bits": 768, "allow_insecure_test_keys": True}


def tree_spec(protocol: str, **trees) -> JobSpec:
    return parse_spec(
        {
            "job": "attacked",
            "protocol": protocol,
            "crypto": TEST_KEYS,
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "model": {"trees": {"count": 6, "depth": 3, "bins": 16, **trees}},
            "train": {"seed": 1},
            "validation": {"fraction": 0.2},
        }
    )


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return synthetic_tables(tmp_path_factory.mktemp("tables"), ROWS, positives=0.3)


def _row(rows, attack: str, used: str):
    """The row of `attack` whose `used` begins with `used`."""
    (found,) = [r for r in rows if r.attack == attack and r.used.startswith(used)]
    return found


def test_split_gives_labels_away_and_its_cuts_order_the_rows(data, tmp_path: Path) -> None:
    # Execute
    views = recorded_run(tree_spec("split"), data, tmp_path)
    rows = attacks(views, "split")
    # Assert: the sign of g is the label; the instance space alone beats chance
    sign = _row(rows, "gradient_sign", "received (g, h)")
    assert sign.score == 1.0 and sign.verdict == LEAKS
    assert _row(rows, "instance_space", "instance space of 6 trees").verdict == LEAKS
    for where in ("validation rows", "training rows"):
        order = _row(rows, "feature_order", where)
        assert order.verdict == LEAKS and order.score > 0.5, order


def test_secureboost_hides_g_not_the_instance_space(data, tmp_path: Path) -> None:
    # Execute
    views = recorded_run(tree_spec("secureboost"), data, tmp_path)
    rows = attacks(views, "secureboost")
    # Assert
    sign = _row(rows, "gradient_sign", "received (g, h) ciphertexts")
    assert sign.verdict == AT_CHANCE, sign
    assert _row(rows, "instance_space", "instance space of").verdict == LEAKS
    assert all(r.verdict == LEAKS for r in rows if r.attack == "feature_order"), rows


def test_active_trees_hide_the_first_trees_from_the_passive_party(data, tmp_path: Path) -> None:
    # Execute: the first two rounds on the bank's columns alone
    views = recorded_run(tree_spec("split", active_trees=2), data, tmp_path)
    shop = views["shop"]
    # Assert: it received nothing of rounds 1 and 2, neither (g, h) nor partitions
    assert sorted(shop.rounds) == [3, 4, 5, 6]
    assert not {1, 2} & set(shop.received)  # (their `go` is a control, not an array)
    assert {"gh", "d0/grow"} <= set(shop.received[3])
    assert instance_groups(shop).shape[1] == 4
    bank_rounds = views["bank"].rounds
    assert all(not len(bank_rounds[r].get("cut_size_shop", [])) for r in (1, 2))


def test_active_levels_keep_passive_splits_off_the_top_not_the_partitions(
    data, tmp_path: Path
) -> None:
    # Execute: the first level of every tree on the bank's columns alone
    views = recorded_run(tree_spec("split", active_levels=1), data, tmp_path)
    bank, shop = views["bank"], views["shop"]
    # Assert: no split of the shop's at a root (so no root cut over every training row)...
    levels = np.concatenate([r.get("cut_level_shop", []) for r in bank.rounds.values()])
    assert len(levels) and levels.min() >= 1
    assert all("d0/hist" not in shop.received.get(r, {}) for r in bank.rounds)
    # ...yet the shop still receives every partition: the instance space is the same
    assert all("d0/grow" in shop.received[r] for r in shop.rounds)
    assert _row(attacks(views, "split"), "instance_space", "instance space").verdict == LEAKS


def test_propagation_and_chains_on_known_structure() -> None:
    """The attacks' two primitives on arrays whose answer is known."""
    # Prepare: two trees; rows 0-1 share both leaves with the known positive 4, rows 2-3
    # with the known negative 5
    groups = np.array([[0, 2], [0, 2], [1, 3], [1, 3], [0, 2], [1, 3]])
    x = np.arange(10)
    cuts = np.array([x <= 2, x % 2 == 0, x <= 6, x <= 4])  # one column's three, another
    # nodes' partitions of rows 0-9 by x <= 2 (over rows 0-5) and x <= 6 (over rows 4-9)
    parts = [(np.arange(6), x[:6] <= 2), (np.arange(4, 10), x[4:] <= 6)]
    # Execute
    scores = propagate(groups, np.array([4, 5]), np.array([1, 0]))
    found = sorted(sorted(c) for c in chains(cuts))
    ranks = interval_ranks([0, 1], parts, 10)
    # Assert
    assert scores[:4].tolist() == [1.0, 1.0, -1.0, -1.0]
    assert found == [[0, 2, 3], [1]]
    # (row 3 is only known above t_1, row 6 only below t_2: the middles of their intervals)
    assert ranks.tolist() == [0.5, 0.5, 0.5, 2.0, 1.5, 1.5, 1.0, 2.5, 2.5, 2.5]
