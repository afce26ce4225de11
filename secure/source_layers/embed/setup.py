"""Protocol parameters of the Embed-MatMul layer: scales, slot layouts and their wire form.

The active party decides them (`EmbedParams.for_active`) and sends them to every
passive party in its setup. Scales (powers of two, by exponent), with f_E the
module's `EMBED_SCALES` (the MatMul layer's scales in `SecureConfig` are tuned for its
own packing and do not apply here):

    f_E                 embedding tables Q and the looked-up rows E
    f_W = f_Z - f_E     the dense weight W, so that E W lands on f_Z
    f_G = f_Z - 2 f_E   the step lr*G, so that the update E^T (lr G) lands on f_W
    trunc = f_G + f_W - f_E   bits dropped from (lr G) W^T before it updates Q

Slot layouts (sigma = stat_bits, b = slot_bits, the read-back bound of W, dW and dE):

    E layout   63-bit slots; an embedding value must fit e_bits = 63 - sigma - 2 bits
               (|Q share| < 2^(e_bits - 1 - f_E), 16 by default) so that E - R, with a
               per-slot mask R < 2^(e_bits + sigma), fits its slot and int64
    wide       b + sigma + 2 bits: a read-back value plus a per-slot mask
    h layout   wide slots over the h outputs; fewer slots than fit, so that the packed
               cross term E'_B W (slots up to prod_bits) plus its mask stays below n/2
    D layout   wide slots over the F*k embedding columns (rows of W^T, and dE)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vfl.proto import common_pb2
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, PayloadError
from vfl.secure.source_layers.embed.packing import FieldLayout, SlotLayout
from vfl.secure.wire.payload import Payload, layer_setup_from_payload, layer_setup_to_payload

E_SLOT_BITS = 63
EMBED_SCALES = {"feature_bits": 16, "output_bits": 52, "slot_bits": 62}  # f_E, f_Z, b
DIM_BITS = 16  # F*k < 2^16

_FIELDS = (
    "out_dim",
    "emb_dim",
    "feature_bits",
    "output_bits",
    "slot_bits",
    "stat_bits",
    "key_bits",
    "passive_ids",
)


@dataclass(frozen=True)
class EmbedParams:
    """The protocol values of one Embed-MatMul layer; the active party decides them."""

    out_dim: int
    emb_dim: int
    feature_bits: int
    output_bits: int
    slot_bits: int
    stat_bits: int
    key_bits: int
    passive_ids: tuple[str, ...]

    @classmethod
    def for_active(
        cls, config: SecureConfig, emb_dim: int, out_dim: int, passive_ids: Sequence[str]
    ) -> EmbedParams:
        """Raises:
        ConfigError: the configuration leaves no room for this layer's scales or slots.
        """
        params = cls(
            out_dim,
            emb_dim,
            EMBED_SCALES["feature_bits"],
            EMBED_SCALES["output_bits"],
            EMBED_SCALES["slot_bits"],
            config.stat_bits,
            config.key_bits,
            tuple(passive_ids),
        )
        try:
            params.check()
        except PayloadError as exc:
            raise ConfigError(str(exc)) from exc
        return params

    @property
    def weight_bits(self) -> int:
        return self.output_bits - self.feature_bits

    @property
    def grad_bits(self) -> int:
        return self.output_bits - 2 * self.feature_bits

    @property
    def trunc_bits(self) -> int:
        return self.grad_bits + self.weight_bits - self.feature_bits

    @property
    def e_bits(self) -> int:
        """Bits (sign included) of an embedding value at scale f_E."""
        return E_SLOT_BITS - self.stat_bits - 2

    @property
    def wide_bits(self) -> int:
        return self.slot_bits + self.stat_bits + 2

    @property
    def prod_bits(self) -> int:
        """Bound on the slots of E'_B W: a masked embedding times W, summed over F*k."""
        return (E_SLOT_BITS - 1) + (self.slot_bits - 1) + DIM_BITS

    @property
    def cross_mask_bits(self) -> int:
        """Mask width hiding a packed E'_B W row (all slots, overflow included)."""
        return self.wide_bits * (self.h_slots - 1) + self.prod_bits + 1 + self.stat_bits

    @property
    def h_slots(self) -> int:
        room = (self.key_bits - 4 - self.stat_bits - self.prod_bits) // self.wide_bits + 1
        return min(room, self.d_slots)

    @property
    def d_slots(self) -> int:
        return (self.key_bits - 2) // self.wide_bits

    @property
    def e_slots(self) -> int:
        return (self.key_bits - 2) // E_SLOT_BITS

    def h_layout(self) -> SlotLayout:
        return SlotLayout(self.out_dim, self.wide_bits, self.h_slots)

    def d_layout(self, field_count: int) -> SlotLayout:
        return SlotLayout(field_count * self.emb_dim, self.wide_bits, self.d_slots)

    def e_layout(self, field_count: int) -> FieldLayout:
        return FieldLayout(field_count, self.emb_dim, E_SLOT_BITS, self.e_slots)

    def check(self) -> None:
        """Raises:
        PayloadError: scales or slot layouts that cannot work with this key size.
        """
        problems = [
            (self.out_dim >= 1 and self.emb_dim >= 1, "out_dim and emb_dim must be >= 1"),
            (
                1 <= self.feature_bits <= self.e_bits - 2,
                f"feature_bits (f_E) must be in [1, {self.e_bits - 2}] for embeddings",
            ),
            (self.grad_bits >= 0, "output_bits must be at least 2 * feature_bits"),
            (self.h_slots >= 1 and self.e_slots >= 1, f"a {self.key_bits}-bit key is too small"),
        ]
        for ok, message in problems:
            if not ok:
                raise PayloadError(f"unusable Embed-MatMul parameters: {message}")

    def to_payload(self) -> Payload:
        return layer_setup_to_payload(
            embed=common_pb2.EmbedSetup(**{name: getattr(self, name) for name in _FIELDS})
        )

    @classmethod
    def from_payload(cls, payload: Payload) -> EmbedParams:
        """Raises:
        PayloadError: not a control payload, a field missing or malformed, or values
            that cannot work.
        """
        setup = layer_setup_from_payload(payload, "embed")
        ints = {name: getattr(setup, name) for name in _FIELDS[:-1]}
        params = cls(passive_ids=tuple(setup.passive_ids), **ints)
        params.check()
        return params


def vocab_payload(vocab_sizes: Sequence[int], key_bits: int) -> Payload:
    """What a party announces (or expects) about one passive party's fields."""
    inputs = common_pb2.EmbedInputs(vocab_sizes=list(vocab_sizes), key_bits=key_bits)
    return layer_setup_to_payload(embed_inputs=inputs)


def vocab_from_payload(payload: Payload, party: str) -> tuple[tuple[int, ...], int]:
    """(vocab sizes, key bits) from a `vocab_payload`.

    Raises:
        PayloadError: missing or malformed fields, or a field of size < 1.
    """
    inputs = layer_setup_from_payload(payload, "embed_inputs")
    sizes, key_bits = tuple(inputs.vocab_sizes), inputs.key_bits
    if not sizes or min(sizes) < 1:
        raise PayloadError(f"party '{party}' announced unusable vocabulary sizes {sizes}")
    return sizes, key_bits


def check_vocab(vocab_sizes: Sequence[int], emb_dim: int) -> tuple[int, ...]:
    """Raises:
    ConfigError: no fields, a vocabulary of size < 1, or F*k >= 2^16.
    """
    sizes = tuple(int(v) for v in vocab_sizes)
    if not sizes or min(sizes) < 1 or len(sizes) * emb_dim >= 1 << DIM_BITS:
        raise ConfigError(
            f"need at least one field, every vocabulary size >= 1 and F*k < 2^{DIM_BITS}, "
            f"got {len(sizes)} fields of sizes {sizes} and k={emb_dim}"
        )
    return sizes
