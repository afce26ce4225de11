"""Setup of the MatMul source layer: keys, protocol parameters and initial shares.

Messages (tags under the setup prefix P; every payload is a public key, a control
message of sizes and scales, or ciphertexts):

    A_k -> B  P/pk, P/params      pk_Ak; d_Ak, f_X of A_k
    B -> A_k  P/pk, P/params      pk_B; d_B, h, scales, slot layout, rows per m1/m2
                                  ciphertext (chosen from every d_Ak), passive order
    B -> A_k  P/v_a               [[V_Ak^(0)]]_B   (B samples V_Ak^(0))
    A_k -> B  P/u_b               [[U_B^k]]_Ak     (A_k samples U_Ak and U_B^k)
  only with K >= 2 passive parties: the pair seeds of the zero-sum masks
    B -> A_k  P/pk/<A_j>, P/seed/<A_j>; A_j -> B  P/seed/<A_k>  (`secure.source_layers.seeds`)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from vfl.proto import common_pb2
from vfl.secure.config import SecureConfig
from vfl.secure.errors import PayloadError
from vfl.secure.paillier.encoding import Packer
from vfl.secure.source_layers.matmul.row_packing import RowLayout, choose_rows
from vfl.secure.source_layers.matmul.row_shares import RowChunks, worth_it
from vfl.secure.wire.payload import Payload, layer_setup_from_payload, layer_setup_to_payload

_FIELDS = (
    "out_dim",
    "active_in_dim",
    "active_feature_bits",
    "output_bits",
    "slot_bits",
    "stat_bits",
    "key_bits",
    "rows_per_cipher",
    "passive_ids",
)


@dataclass(frozen=True)
class LayerParams:
    """The protocol values of one source layer; the active party decides them."""

    out_dim: int
    active_in_dim: int
    active_feature_bits: int
    output_bits: int
    slot_bits: int
    stat_bits: int
    key_bits: int
    rows_per_cipher: int
    passive_ids: tuple[str, ...]

    @classmethod
    def for_active(
        cls, config: SecureConfig, in_dim: int, out_dim: int, passive_ids: Sequence[str]
    ) -> LayerParams:
        params = cls(
            out_dim,
            in_dim,
            config.feature_bits,
            config.output_bits,
            config.slot_bits,
            config.stat_bits,
            config.key_bits,
            1,
            tuple(passive_ids),
        )
        params.grad_bits(config.feature_bits)
        return params

    def with_row_packing(self, limit: int | None, max_passive_in_dim: int) -> LayerParams:
        """These parameters with rows per m1/m2 ciphertext chosen by the cost model of
        `secure.source_layers.matmul.row_packing` (`limit`: SecureConfig.rows_per_cipher)."""
        rows = choose_rows(self.out_dim, self.packer().slots, max_passive_in_dim, limit)
        return replace(self, rows_per_cipher=rows)

    def packer(self) -> Packer:
        return Packer(self.key_bits, self.slot_bits, self.stat_bits)

    def layout(self) -> RowLayout:
        """How batch rows share the ciphertexts of m1 and m2."""
        return RowLayout(self.rows_per_cipher, self.out_dim, self.slot_bits)

    def row_chunks(self) -> RowChunks:
        """How the setup m1 of a precomputed row set lays out rows (`matmul.row_shares`)."""
        slots = self.packer().slots
        return RowChunks.of(self.out_dim, slots, self.slot_bits, self.stat_bits, self.key_bits)

    def precompute_pays(self, uses: int) -> bool:
        """Whether rows that go forward `uses` times cost fewer ciphertexts with setup m1."""
        return worth_it(uses, self.row_chunks(), self.layout())

    def weight_bits(self, feature_bits: int) -> int:
        """Scale f_V of a weight share over features at 2^feature_bits."""
        return self.output_bits - feature_bits

    def grad_bits(self, feature_bits: int) -> int:
        """Scale f_G of [[eta G]] for a party with features at 2^feature_bits.

        Raises:
            PayloadError: output_bits leaves no room for it (needs f_Z >= 2 f_X).
        """
        bits = self.output_bits - 2 * feature_bits
        if bits < 0:
            raise PayloadError(
                f"output scale 2^{self.output_bits} is too small for features at "
                f"2^{feature_bits}: raise output_bits to at least {2 * feature_bits}"
            )
        return bits

    def to_payload(self) -> Payload:
        return layer_setup_to_payload(
            matmul=common_pb2.MatMulSetup(**{name: getattr(self, name) for name in _FIELDS})
        )

    @classmethod
    def from_payload(cls, payload: Payload) -> LayerParams:
        """Raises:
        PayloadError: not the MatMul layer's setup, or parameters that cannot work.
        """
        setup = layer_setup_from_payload(payload, "matmul")
        ints = {name: getattr(setup, name) for name in _FIELDS[:-1]}
        params = cls(passive_ids=tuple(setup.passive_ids), **ints)
        params.packer_checked()
        return params

    def packer_checked(self) -> Packer:
        """Raises:
        PayloadError: the slot layout does not fit the key, or more rows per ciphertext
            than its slots hold.
        """
        try:
            packer = self.packer()
        except ValueError as exc:
            raise PayloadError(f"unusable layer parameters: {exc}") from exc
        rows = self.rows_per_cipher
        if rows < 1 or (rows > 1 and rows * self.out_dim > packer.slots):
            raise PayloadError(
                f"{self.rows_per_cipher} rows of {self.out_dim} outputs do not fit the "
                f"{packer.slots} slots of one ciphertext; the parameters are corrupt"
            )
        return packer


def passive_info_payload(in_dim: int, feature_bits: int, key_bits: int) -> Payload:
    inputs = common_pb2.MatMulInputs(in_dim=in_dim, feature_bits=feature_bits, key_bits=key_bits)
    return layer_setup_to_payload(matmul_inputs=inputs)


def passive_info_from_payload(payload: Payload, params: LayerParams, party: str) -> tuple[int, int]:
    """(in_dim, feature_bits) announced by a passive party.

    Raises:
        PayloadError: missing or malformed fields, or a key size different from B's.
    """
    info = layer_setup_from_payload(payload, "matmul_inputs")
    in_dim, bits, key_bits = info.in_dim, info.feature_bits, info.key_bits
    if in_dim < 1 or not 0 <= bits <= 32:
        raise PayloadError(f"party '{party}' announced in_dim={in_dim}, feature_bits={bits}")
    if key_bits != params.key_bits:
        raise PayloadError(
            f"party '{party}' uses {key_bits}-bit keys, the active party {params.key_bits}; "
            "set the same SecureConfig.key_bits on every party"
        )
    params.grad_bits(bits)
    return in_dim, bits
