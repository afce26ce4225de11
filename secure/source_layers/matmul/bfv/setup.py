"""What both parties of the BFV MatMul layer agree on at setup, and the noise bounds that
size their flooding.

Every bound is computed from public quantities only (the layout, the batch size, the
scales and the feature range), so the width of the flooding noise says nothing about a
party's values:

    m1, m2  (forward):  |noise| <= (rows per group) x d_c x blocks x 2^(f_X + range) x 2^5
    vr      (refresh):  |noise| <= 2^5 + (rows of the batch) x d_c x 2^(f_X + range + 8) x 2^5

(2^5 bounds a fresh symmetric encryption's noise, `lattice.params.NOISE_BITS`; 2^8 caps
a passive party's per-feature step factor c_j). The flooding noise is uniform over 2^40
times the bound (`BfvParams.stat_bits`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from vfl.secure.errors import ConfigError, PayloadError
from vfl.secure.lattice.layout import BlockLayout, choose_layout
from vfl.secure.lattice.params import NOISE_BITS, BfvParams

STEP_FACTOR_BITS = 8  # c_j <= 2^8: a feature seen in 1 of 65,536 rows or more often
DEFAULT_RANGE_BITS = 7  # |x| < 128 for real features (integer features: their own bits)
INTEGER_RANGE_BITS = 20  # integer features (f_X = 0): |x| < 2^20, as for Paillier


@dataclass(frozen=True)
class BfvLayerParams:
    """The layer's sizes, scales and BFV parameters, as the active party sends them."""

    out_dim: int
    active_in_dim: int
    passive_in_dim: int
    active_feature_bits: int
    passive_feature_bits: int
    output_bits: int
    batch_rows: int
    poly_degree: int
    coeff_bits: tuple[int, ...]
    plain_bits: int
    stat_bits: int

    @property
    def bfv(self) -> BfvParams:
        return BfvParams(self.poly_degree, self.coeff_bits, self.plain_bits, self.stat_bits)

    def check(self) -> None:
        """Raises:
        ConfigError: scales that do not fit the plaintext modulus, or BFV parameters
            below 128-bit security (named by field).
        """
        self.bfv.validate()
        for who, bits in (
            ("active", self.active_feature_bits),
            ("passive", self.passive_feature_bits),
        ):
            if self.output_bits < 2 * bits:
                raise ConfigError(
                    f"output_bits ({self.output_bits}) must be >= 2 x the {who} party's "
                    f"feature_bits ({bits})"
                )
        if self.output_bits + 2 > self.plain_bits:
            raise ConfigError(
                f"crypto.bfv.plain_bits ({self.plain_bits}) must exceed output_bits "
                f"({self.output_bits}) + 1: Z is read back mod 2^plain_bits"
            )

    def layouts(self) -> tuple[BlockLayout, BlockLayout]:
        """(A's layout of V_A, refreshed each step; B's layout of U_B, fixed)."""
        n, h, rows = self.poly_degree, self.out_dim, self.batch_rows
        return (
            choose_layout(n, self.passive_in_dim, h, rows, refreshed=True),
            choose_layout(n, self.active_in_dim, h, rows, refreshed=False),
        )

    def weight_bits(self, feature_bits: int) -> int:
        return self.output_bits - feature_bits

    def grad_bits(self) -> int:
        return self.output_bits - 2 * self.passive_feature_bits

    def forward_flood(self, lay: BlockLayout, feature_bits: int) -> int:
        terms = lay.rows_forward * lay.width * lay.blocks
        noise = math.ceil(math.log2(terms)) + x_bits(feature_bits) + NOISE_BITS
        return self.bfv.flood_bits(noise)

    def refresh_flood(self, lay: BlockLayout, rows: int) -> int:
        terms = lay.row_blocks(rows) * lay.rows_backward * lay.width
        bits = x_bits(self.passive_feature_bits) + STEP_FACTOR_BITS
        return self.bfv.flood_bits(math.ceil(math.log2(terms)) + bits + NOISE_BITS + 1)

    def to_fields(self) -> dict[str, str]:
        out = {f.name: str(getattr(self, f.name)) for f in fields(self)}
        out["coeff_bits"] = ",".join(str(b) for b in self.coeff_bits)
        return out

    @classmethod
    def from_fields(cls, values: dict[str, str]) -> BfvLayerParams:
        """Raises:
        PayloadError: a field is missing or malformed.
        """
        try:
            kwargs: dict[str, object] = {
                f.name: int(values[f.name]) for f in fields(cls) if f.name != "coeff_bits"
            }
            kwargs["coeff_bits"] = tuple(int(b) for b in values["coeff_bits"].split(","))
        except (KeyError, ValueError) as exc:
            raise PayloadError(f"malformed BFV layer parameters: {exc}") from exc
        return cls(**kwargs)  # type: ignore[arg-type]


def range_bits(feature_bits: int) -> int:
    return INTEGER_RANGE_BITS if feature_bits == 0 else DEFAULT_RANGE_BITS


def x_bits(feature_bits: int) -> int:
    """Bits of |round(x 2^f_X)| for features within their range."""
    return feature_bits + range_bits(feature_bits)


def held_bytes(bfv: BfvParams, columns: int, out_dim: int, batch_rows: int) -> int:
    """An estimate, from above, of the bytes a party's BFV layer holds over its `columns`
    columns (the party's limits, `party.limits`): its weight ciphertexts, one step's
    plaintexts and ciphertexts (twice: each also as the bytes that cross), its keys."""
    n, primes = bfv.poly_degree, len(bfv.coeff_bits)
    ciphertext, plaintext = 2 * (primes - 1) * n * 8, n * 8
    try:
        lay = choose_layout(n, max(columns, 1), out_dim, batch_rows, refreshed=True)
        blocks, groups, row_blocks = lay.blocks, lay.groups(batch_rows), lay.row_blocks(batch_rows)
    except ConfigError:  # out_dim too wide for the ring: setup refuses it
        blocks, groups, row_blocks = columns, batch_rows, batch_rows
    step = (groups + row_blocks + 2 * blocks) * ciphertext * 2
    step += (groups + row_blocks) * blocks * plaintext
    keys = 4 * 2 * primes * n * 8  # own public and secret key, the peer's public key
    return blocks * ciphertext + step + keys
