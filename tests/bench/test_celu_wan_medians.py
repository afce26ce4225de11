"""bench/celu_wan.py --seeds: the medians over seeds, with never-reached targets and
lower-bound speedups handled as the docstring says."""

from __future__ import annotations

import pytest

from tests.support.bench import bench_module


@pytest.fixture(scope="module")
def bench():
    yield from bench_module("celu_wan")


def row(rounds, secs, auc, **speedups) -> dict:
    return {
        "target_auc": 0.74,
        "rounds_to_target": rounds,
        "seconds_to_target": secs,
        "final_auc": auc,
        "bytes_sent": 100,
        "history": [{"round": 1, "auc": 0.5}],
        **speedups,
    }


@pytest.mark.parametrize(
    ("values", "median"),
    [([3], 3), ([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([1, None, 2], 2), ([None, 1, None], None)],
)
def test_median_counts_never_as_the_largest(bench, values, median) -> None:
    assert bench._median(values) == median


def test_medians_over_seeds(bench) -> None:
    seeds = [
        {
            "vanilla": row(220, 60.0, 0.74),
            "fedbcd": row(None, None, 0.70),
            "celu": row(80, 20.0, 0.76, speedup_vs_vanilla=3.0, speedup_vs_fedbcd_at_least=3.1),
        },
        {
            "vanilla": row(200, 50.0, 0.75),
            "fedbcd": row(150, 40.0, 0.75),
            "celu": row(100, 25.0, 0.77, speedup_vs_vanilla=2.0, speedup_vs_fedbcd=1.6),
        },
        {
            "vanilla": row(210, 55.0, 0.73),
            "fedbcd": row(None, None, 0.69),
            "celu": row(None, None, 0.72, speedup_vs_fedbcd_at_least=1.0),
        },
    ]
    out = bench.median_over_seeds(seeds)
    assert out["vanilla"]["rounds_to_target"] == 210 and out["vanilla"]["final_auc"] == 0.74
    assert out["fedbcd"]["rounds_to_target"] is None  # two of three seeds never got there
    celu = out["celu"]
    assert celu["rounds_to_target"] == 100 and celu["seconds_to_target"] == 25.0
    # one seed never reached vanilla's target: no median speedup over vanilla
    assert "speedup_vs_vanilla" not in celu and "speedup_vs_vanilla_at_least" not in celu
    # two seeds' speedups over FedBCD are lower bounds, so the median is one too
    assert celu["speedup_vs_fedbcd_at_least"] == 1.6 and "speedup_vs_fedbcd" not in celu
    assert len(celu["per_seed"]) == 3 and "history" not in celu["per_seed"][0]


def test_exact_speedups_give_an_exact_median(bench) -> None:
    seeds = [
        {"vanilla": row(220, 60.0, 0.74), "celu": row(80, 20.0, 0.76, speedup_vs_vanilla=s)}
        for s in (2.4, 3.0, 2.6, 4.2)
    ]
    assert bench.median_over_seeds(seeds)["celu"]["speedup_vs_vanilla"] == 2.8
