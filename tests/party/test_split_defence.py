"""Split's optional defence (`defence:` in the spec): randomised response on the labels
and noise on the derivatives sent, and where the spec allows them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from vfl.contract.errors import SpecError
from vfl.contract.spec import DefenceSpec, parse_spec
from vfl.party.training.split.defence import GradientNoise, flip_probability, randomised_labels


def test_randomised_response_flips_the_training_rows_at_its_rate() -> None:
    labels = torch.zeros(20_000)
    rows = np.arange(0, 20_000, 2)  # every other row trains
    flipped = randomised_labels(labels, rows, 1.0, seed=3)
    assert flip_probability(1.0) == pytest.approx(1 / (1 + math.e))
    rate = float(flipped[rows].mean())
    assert abs(rate - flip_probability(1.0)) < 4 * math.sqrt(0.27 * 0.73 / len(rows))
    assert float(flipped[1::2].sum()) == 0  # rows that do not train keep their label
    assert torch.equal(flipped, randomised_labels(labels, rows, 1.0, seed=3))
    assert float(labels.sum()) == 0  # a copy


def test_gradient_noise_scales_with_the_batch() -> None:
    grad = torch.randn(512, 16) * 0.01
    assert GradientNoise(None, 0)(grad) is grad
    noisy = GradientNoise(DefenceSpec(gradient_noise=4.0), 0)(grad)
    rms = float(grad.pow(2).mean().sqrt())
    assert float((noisy - grad).pow(2).mean().sqrt()) == pytest.approx(4 * rms, rel=0.05)


def _spec(protocol: str, task: str, defence: dict) -> object:
    return parse_spec(
        {
            "parties": [
                {"id": "bank", "role": "active", "data": {"dataset": "d"}},
                {"id": "shop", "role": "passive", "data": {"dataset": "d"}},
            ],
            "protocol": protocol,
            "crypto": {"key_bits": 512, "allow_insecure_test_keys": True},
            "model": {"top": {"task": task}},
            "defence": defence,
        }
    )


def test_the_defence_is_for_split_and_label_dp_for_binary_labels() -> None:
    assert _spec("split", "binary", {"label_epsilon": 2}).defence.label_epsilon == 2.0
    with pytest.raises(SpecError, match="defence.*protocol: split"):
        _spec("blindfl", "binary", {"gradient_noise": 1})
    with pytest.raises(SpecError, match="label_epsilon needs model.top.task: binary"):
        _spec("split", "regression", {"label_epsilon": 1})
    with pytest.raises(SpecError, match="gradient_noise"):
        _spec("split", "binary", {"gradient_noise": -1})
