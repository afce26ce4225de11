"""The `crypto:` section of a job spec: the scheme of `protocol: blindfl`'s MatMul layer,
its Paillier key size and obfuscators, and the BFV parameters of `scheme: bfv`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator
from vfl.contract.spec.fields import FieldProblem, SpecModel


class BfvSpec(SpecModel):
    """The BFV parameters of `crypto: {scheme: bfv}` (docs/protocols.md). Both parties must
    set the same; a party refuses at PREPARE a coefficient modulus above the homomorphic
    encryption standard's bound for 128-bit security at `poly_degree`."""

    poly_degree: Literal[1024, 2048, 4096, 8192, 16384, 32768] = Field(
        8192, description="the ring degree N"
    )
    coeff_bits: tuple[int, ...] = Field(
        (60, 60, 60, 38),
        min_length=3,
        max_length=16,
        description="bits of each prime of the coefficient modulus, SEAL's special prime "
        "last; at most 218 bits in all at N = 8192 (438 at 16384) for 128-bit security",
    )
    stat_bits: int = Field(
        40, ge=40, le=80, strict=True, description="statistical security of noise flooding"
    )


class CryptoSpec(SpecModel):
    """Encryption of `protocol: blindfl`'s MatMul layer: Paillier (the default) or exact
    BFV. Paillier keys below 2048 bits need the explicitly named test setting
    `allow_insecure_test_keys: true` (daemons log a warning)."""

    scheme: Literal["paillier", "bfv"] = Field(
        "paillier",
        description="paillier, or bfv (lattice, N = 8192 at 128-bit security; the MatMul "
        "layer over dense columns, one passive party, no local updates; see "
        "docs/protocols.md)",
    )
    key_bits: int = Field(2048, ge=512, le=8192, strict=True)
    bfv: BfvSpec = Field(default_factory=BfvSpec)
    allow_insecure_test_keys: bool = Field(False, strict=True)
    obfuscators: Literal["short", "statistical"] = Field(
        "short",
        description="obfuscators of each party's fresh encryptions for the other party: "
        "short (short exponents, Damgard-Jurik-Nielsen; assumes a short exponent cannot be "
        "told from a full one) or statistical (no assumption); see docs/security.md",
    )

    @model_validator(mode="after")
    def _secure_keys(self) -> CryptoSpec:
        if self.key_bits < 2048 and not self.allow_insecure_test_keys:
            raise FieldProblem(
                "key_bits",
                f"is {self.key_bits}: keys below 2048 bits are insecure; use 2048 or more, "
                "or for tests only set crypto.allow_insecure_test_keys: true",
            )
        return self
