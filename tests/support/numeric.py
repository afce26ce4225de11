"""The one numeric comparison of the test suite."""

from __future__ import annotations

from typing import Any

import numpy as np


def assert_close(actual: Any, expected: Any, rtol: float = 1e-6, atol: float = 0.0) -> float:
    """Assert ||actual - expected|| <= rtol * ||expected|| + atol (2-norm over all entries).

    Takes arrays, tensors or lists; the shapes must be equal. Returns the relative error.
    """
    a = np.asarray(_plain(actual), dtype=np.float64)
    e = np.asarray(_plain(expected), dtype=np.float64)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    err, norm = float(np.linalg.norm(a - e)), float(np.linalg.norm(e))
    assert err <= rtol * norm + atol, f"error {err:.3g} > {rtol:.3g} x {norm:.3g} + {atol:.3g}"
    return err / max(norm, 1e-300)


def _plain(value: Any) -> Any:
    detach = getattr(value, "detach", None)
    return detach().cpu().numpy() if detach is not None else value
