"""The BFV MatMul layer: both parties as threads over the in-process channel; its output
and its update equal the plaintext computation within fixed-point precision."""

from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("tenseal")

from vfl.secure.channel import InProcessHub  # noqa: E402
from vfl.secure.config import SecureConfig  # noqa: E402
from vfl.secure.errors import EncodingError  # noqa: E402
from vfl.secure.source_layers.matmul.bfv import ActiveBfvLayer, PassiveBfvLayer  # noqa: E402


def _both(active_call, passive_call) -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            passive_call()
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        active_call()
    finally:
        thread.join()
    if errors:
        raise errors[0]


def _layers(d_a: int, d_b: int, h: int, rows: int = 64):
    config = SecureConfig(key_bits=512, allow_insecure_test_keys=True)
    hub = InProcessHub()
    active = ActiveBfvLayer(hub.channel("B"), ["A"], d_b, h, config, 1, batch_rows=rows)
    passive = PassiveBfvLayer(hub.channel("A"), "B", d_a, h, config, 2)
    _both(lambda: active.setup("s"), lambda: passive.setup("s"))
    return active, passive


def _weights(active: ActiveBfvLayer, passive: PassiveBfvLayer) -> tuple[np.ndarray, np.ndarray]:
    """W_A = U_A + V_A (V_A decrypted with B's key, for the test only) and W_B."""
    lay, bits = passive.lay_a, active.params.weight_bits(passive.config.feature_bits)
    from vfl.secure.lattice.bfv import centered

    polys = np.stack([active.keys.decrypt(ct) for ct in passive.v_a])
    v_a = centered(lay.read_weights(polys), active.bfv.plain_bits) / 2.0**bits
    u_b_polys = np.stack([passive.keys.decrypt(ct) for ct in active.u_b])
    b_bits = active.params.weight_bits(active.config.feature_bits)
    u_b = centered(active.lay_b.read_weights(u_b_polys), active.bfv.plain_bits) / 2.0**b_bits
    return passive.u_a + v_a, active.v_b + u_b


@pytest.mark.parametrize("shape", [(13, 10, 8, 40), (7, 5, 3, 70)])
def test_forward_and_backward_match_plaintext(shape) -> None:
    # Prepare
    d_a, d_b, h, n = shape
    active, passive = _layers(d_a, d_b, h)
    rng = np.random.default_rng(0)
    x_a, x_b = rng.normal(size=(n, d_a)), rng.normal(size=(n, d_b))
    w_a, w_b = _weights(active, passive)
    grad, lr = rng.normal(size=(n, h)) / n, 0.5
    # Execute
    out: dict[str, np.ndarray] = {}
    _both(lambda: out.update(z=active.forward("r1", x_b)), lambda: passive.forward("r1", x_a))
    _both(lambda: active.backward("r1", grad, lr), lambda: passive.backward("r1", lr))
    w_a_after, _ = _weights(active, passive)
    # Assert: fixed point at 2^-8 for features, 2^-25 for weights
    expected = x_a @ w_a + x_b @ w_b
    np.testing.assert_allclose(out["z"], expected, atol=0.05)
    assert np.abs(out["z"] - expected).mean() < 0.01
    np.testing.assert_allclose(w_a_after, w_a - lr * x_a.T @ grad, atol=1e-3)


def test_a_second_step_reads_the_refreshed_share() -> None:
    active, passive = _layers(6, 4, 5)
    rng = np.random.default_rng(1)
    x_a, x_b = rng.normal(size=(30, 6)), rng.normal(size=(30, 4))
    for step in range(2):
        w_a, w_b = _weights(active, passive)
        out: dict[str, np.ndarray] = {}
        tag = f"r{step}"
        _both(
            lambda t=tag, o=out: o.update(z=active.forward(t, x_b)),
            lambda t=tag: passive.forward(t, x_a),
        )
        expected = x_a @ w_a + x_b @ w_b + active.bias
        np.testing.assert_allclose(out["z"], expected, atol=0.05)
        grad = rng.normal(size=(30, 5)) / 30
        _both(
            lambda t=tag, g=grad: active.backward(t, g, 0.3),
            lambda t=tag: passive.backward(t, 0.3),
        )


def test_a_feature_beyond_the_range_is_refused_naming_the_party() -> None:
    active, passive = _layers(3, 2, 2)
    x = np.zeros((4, 2))
    x[0, 0] = 1e6
    with pytest.raises(EncodingError, match="active party"):
        active.forward("r1", x)


def test_a_layer_resumes_from_its_state_dict() -> None:
    # Prepare: one step, then both parties' state
    active, passive = _layers(5, 4, 3)
    rng = np.random.default_rng(2)
    x_a, x_b = rng.normal(size=(20, 5)), rng.normal(size=(20, 4))
    _both(lambda: active.forward("r1", x_b), lambda: passive.forward("r1", x_a))
    grad = rng.normal(size=(20, 3)) / 20
    _both(lambda: active.backward("r1", grad, 0.3), lambda: passive.backward("r1", 0.3))
    w_a, w_b = _weights(active, passive)
    saved_a, saved_p = active.state_dict(), passive.state_dict()
    # Execute: new layers on a new channel load the states instead of setting up
    config = SecureConfig(key_bits=512, allow_insecure_test_keys=True)
    hub = InProcessHub()
    active2 = ActiveBfvLayer(hub.channel("B"), ["A"], 4, 3, config, 1, batch_rows=64)
    passive2 = PassiveBfvLayer(hub.channel("A"), "B", 5, 3, config, 2)
    active2.load_state_dict(saved_a)
    passive2.load_state_dict(saved_p)
    out: dict[str, np.ndarray] = {}
    _both(lambda: out.update(z=active2.forward("r2", x_b)), lambda: passive2.forward("r2", x_a))
    # Assert
    expected = x_a @ w_a + x_b @ w_b + active.bias
    np.testing.assert_allclose(out["z"], expected, atol=0.05)
