"""An Embed-MatMul source layer job for tests: secure layers over a hub, parties as
threads, and the plaintext model Q = Q^A + Q^B, W = W^A + W^B that they must track."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from vfl.secure.channel import InProcessHub
from vfl.secure.source_layers.embed import ActiveEmbedLayer, PassiveEmbedLayer

from tests.support.secure import config_for_tests, run_parties

LR = 0.2
VOCAB = {"A1": [5, 7, 3], "A2": [4, 6]}


@dataclass
class Job:
    """Secure layers of one test plus the plaintext model they must track."""

    active: ActiveEmbedLayer | None
    passives: list[PassiveEmbedLayer]
    model: dict[str, list[np.ndarray] | np.ndarray]
    envelopes: list[tuple[str, str, bytes]] = field(default_factory=list)  # tag, sender, bytes
    initial: list[np.ndarray] = field(default_factory=list)


def make_job(test_keys, k_parties=1, emb_dim=3, h=4, vocab=None, config=None, hub=None) -> Job:
    rng, vocab, config = np.random.default_rng(0), vocab or VOCAB, config or config_for_tests()
    ids = [f"A{i + 1}" for i in range(k_parties)]
    hub, job = hub or InProcessHub(), Job(None, [], {})

    def hook(direction, sender, receiver, tag, data):
        if direction == "sent":
            job.envelopes.append((tag, sender, data))

    init_b = {}
    for pid in ids:
        init_a = initial_shares(rng, job, pid, vocab[pid], emb_dim, h)
        init_b[f"Q_B/{pid}"], init_b[f"W_B/{pid}"] = init_a.pop("Q_B"), init_a.pop("W_B")
        channel = hub.channel(pid, hook)
        layer = PassiveEmbedLayer(
            channel, "B", vocab[pid], emb_dim, h, config, 7, init_a, keypair=test_keys[pid]
        )
        job.passives.append(layer)
    fields = {pid: vocab[pid] for pid in ids}
    job.active = ActiveEmbedLayer(
        hub.channel("B", hook), ids, fields, emb_dim, h, config, 3, init_b, keypair=test_keys["B"]
    )
    calls = [lambda p=p: p.setup("setup") for p in job.passives]
    run_parties(lambda: job.active.setup("setup"), *calls)
    return job


def initial_shares(rng, job: Job, pid: str, vocab: list[int], emb_dim: int, h: int) -> dict:
    """Random shares of Q and W for one passive party; the plaintext model is their sum."""
    shares = {
        "Q_A": [rng.normal(size=(v, emb_dim)) * 0.5 for v in vocab],
        "Q_B": [rng.normal(size=(v, emb_dim)) * 0.5 for v in vocab],
        "W_A": rng.normal(size=(len(vocab) * emb_dim, h)) * 0.3,
        "W_B": rng.normal(size=(len(vocab) * emb_dim, h)) * 0.3,
    }
    job.model[f"Q/{pid}"] = [a + b for a, b in zip(shares["Q_A"], shares["Q_B"], strict=True)]
    job.model[f"W/{pid}"] = shares["W_A"] + shares["W_B"]
    job.initial += [*shares["Q_A"], *shares["Q_B"], shares["W_A"], shares["W_B"]]
    job.initial += [*job.model[f"Q/{pid}"], job.model[f"W/{pid}"]]
    return shares


def draw_codes(rng, job: Job, n: int) -> dict[str, np.ndarray]:
    return {
        p.channel.party_id: np.stack([rng.integers(0, v, size=n) for v in p.vocab_sizes], axis=1)
        for p in job.passives
    }


def secure_step(job: Job, tag, codes, target) -> tuple[np.ndarray, np.ndarray]:
    calls = [lambda p=p: p.forward(tag, codes[p.channel.party_id]) for p in job.passives]
    z = run_parties(lambda: job.active.forward(tag), *calls)[0]
    grad = (z - target) / len(z)
    calls = [lambda p=p: p.backward(tag, LR) for p in job.passives]
    run_parties(lambda: job.active.backward(tag, grad, LR), *calls)
    return z, grad


def close(job: Job) -> None:
    job.active.close()
    for p in job.passives:
        p.close()
