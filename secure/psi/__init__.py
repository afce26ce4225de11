"""ECDH private set intersection over a `Channel` (the ALIGNING stage of a job).

protocol   `run_psi`, its settings (`PsiConfig`) and result (`PsiResult`)
curve      ids hashed onto X25519 and blinded (`Blinder`)
active     the active party's matching and ordering
wire       the points and control messages of a run
"""

from vfl.secure.psi.curve import IdColumn
from vfl.secure.psi.protocol import PsiConfig, PsiResult, run_psi

__all__ = ["IdColumn", "PsiConfig", "PsiResult", "run_psi"]
