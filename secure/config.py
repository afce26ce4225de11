"""`SecureConfig`: the settings of the Paillier engine and the source-layer protocols.

Fixed-point scales of the MatMul source layer (docs/protocols.md §4), all powers of two
given by their exponent:

    f_X  feature_bits        this party's features; 0 means integer (e.g. binary) features,
                             whose products with ciphertexts are ciphertext additions
    f_Z  output_bits         the scale of Z and of every term added into one ciphertext
    f_V  = f_Z - f_X         the scale of the weight shares over this party's features
    f_G  = f_V - f_X         the scale of the encrypted step [[eta G]] sent to that party

so that X (f_X) times a weight share (f_V) lands on f_Z, and the update X^T [[eta G]]
lands on f_V, which keeps the encrypted share's scale constant across updates.

The defaults (f_X = 8 for real-valued features, f_Z = 33, 41-bit slots) are chosen for
the packing: a value read back needs |Z| < 2^(slot_bits - 1 - f_Z) = 128, and 41-bit
slots put 48 slots in a 2048-bit plaintext (with the 40-bit statistical mask), so three
rows of a 16-wide layer share one ciphertext of m1 and m2 (docs/protocols.md §4, Fixed
point and scales, has the accuracy argument). The Embed-MatMul layer keeps its own
scales (`secure.source_layers.embed.setup.EMBED_SCALES`).

Key size: 2048 bits unless `allow_insecure_test_keys` is set explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vfl.secure.errors import ConfigError, PaillierKeyError

if TYPE_CHECKING:  # annotations only: vfl.secure.paillier imports this module
    from vfl.secure.executor.base import BlockExecutor
    from vfl.secure.paillier.counters import OpCounts

MIN_KEY_BITS = 2048
MIN_TEST_KEY_BITS = 512
OBFUSCATOR_METHODS = ("fixed-base", "full")
FRESH_OBFUSCATORS = ("short", "statistical")
DENSE_FEATURE_BITS = 8  # f_X of real-valued features (integer features use 0)


@dataclass(frozen=True)
class SecureConfig:
    """Settings of one party's secure layer (the active party's protocol values win).

    Attributes:
        key_bits: Paillier modulus size. Below 2048 only with `allow_insecure_test_keys`.
        allow_insecure_test_keys: permit keys of 512..2047 bits, for tests only.
        feature_bits: fixed-point scale f_X of this party's features (0: integer features).
        output_bits: scale f_Z of the layer output and of every term summed into it.
        slot_bits: width of one packed slot, sign included; a slot holds |v| < 2^(w-1).
        stat_bits: statistical hiding bits of masks (sigma in docs/protocols.md §4, Masks).
        workers: processes for ciphertext matrix products (None: all cores; 1: in-process)
            when no `executor` is given.
        executor: where large decryptions, ciphertext matrix products and
            re-randomisations beyond the pools' ready obfuscators run: the party's
            executor (`secure.executor`, from its party config's `compute:`), owned by
            the party, not by the layer; None: a local process pool of `workers`.
        parallel_min_terms: products with fewer nonzero terms stay in-process.
        threads: threads for GIL-free batch exponentiations (obfuscators, decryption).
        obfuscator_pool: r^n values kept ready per public key (each is used once).
        background_refill: refill the obfuscator pools in a background thread (only
            while the party waits for a peer message).
        timeout_s: receive deadline of every protocol message (None: channel default).
        obfuscator: how r^n is computed: "fixed-base" (secret random power tables,
            statistically uniform, ~6x faster for a peer's key; see
            `secure.paillier.fixed_base`) or "full" (one full exponentiation each).
        obfuscator_helpers: processes per obfuscator pool that sample from copies of its
            fixed-base table, so that table products use more than one core.
        fresh_obfuscators: the obfuscators of this party's fresh encryptions under its own
            key, all of which go to the other party (the job spec's `crypto.obfuscators`):
            "short" (h_s^a with a short exponent, Damgard-Jurik-Nielsen; an extra
            assumption, see `secure.paillier.short_exponent`; keys without h_s fall back
            to statistical) or "statistical" (uniform n-th residues, no assumption).
            Re-randomisations of ciphertexts that go to a key's owner are statistical
            either way.
        rows_per_cipher: at most this many batch rows share one ciphertext of m1 and m2
            (None: chosen by the cost model of
            `secure.source_layers.matmul.row_packing`; 1: one row each).
        counts: where the engine adds the homomorphic operations it does (the party
            daemon's, exported as metrics; None: not counted).
    """

    key_bits: int = MIN_KEY_BITS
    allow_insecure_test_keys: bool = False
    feature_bits: int = DENSE_FEATURE_BITS
    output_bits: int = 33
    slot_bits: int = 41
    stat_bits: int = 40
    workers: int | None = None
    parallel_min_terms: int = 2_000
    threads: int | None = None
    obfuscator_pool: int = 512
    background_refill: bool = True
    timeout_s: float | None = None
    obfuscator: str = "fixed-base"
    obfuscator_helpers: int = 1
    rows_per_cipher: int | None = None
    fresh_obfuscators: str = "short"
    counts: OpCounts | None = field(default=None, compare=False, repr=False)
    executor: BlockExecutor | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        """Raises:
        PaillierKeyError: key_bits below 2048 without `allow_insecure_test_keys`, or below 512.
        ConfigError: any other setting out of range.
        """
        check_key_bits(self.key_bits, self.allow_insecure_test_keys, "this party")
        checks = [
            (0 <= self.feature_bits <= 32, "feature_bits must be in [0, 32]"),
            (2 <= self.slot_bits <= 64, "slot_bits must be in [2, 64]"),
            (0 < self.output_bits < self.slot_bits - 1, "output_bits must be in (0, slot_bits-1)"),
            (self.stat_bits >= 40 or self.allow_insecure_test_keys, "stat_bits must be >= 40"),
            (self.workers is None or self.workers >= 1, "workers must be >= 1 or None"),
            (self.threads is None or self.threads >= 1, "threads must be >= 1 or None"),
            (self.obfuscator_pool >= 0, "obfuscator_pool must be >= 0"),
            (self.obfuscator in OBFUSCATOR_METHODS, f"obfuscator must be in {OBFUSCATOR_METHODS}"),
            (self.rows_per_cipher is None or self.rows_per_cipher >= 1, "rows_per_cipher >= 1"),
            (self.obfuscator_helpers >= 0, "obfuscator_helpers must be >= 0"),
            (
                self.fresh_obfuscators in FRESH_OBFUSCATORS,
                f"fresh_obfuscators must be in {FRESH_OBFUSCATORS}",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"invalid SecureConfig: {message}")


def check_key_bits(bits: int, allow_insecure_test_keys: bool, whose: str) -> None:
    """Check a modulus size against the minimum.

    Raises:
        PaillierKeyError: `bits` below 2048 (or below 512 with `allow_insecure_test_keys`).
    """
    if bits < MIN_TEST_KEY_BITS or (bits < MIN_KEY_BITS and not allow_insecure_test_keys):
        raise PaillierKeyError(
            f"the Paillier key of {whose} has {bits} bits; the minimum is {MIN_KEY_BITS} "
            f"(keys of {MIN_TEST_KEY_BITS}..{MIN_KEY_BITS - 1} bits only for tests, with "
            "SecureConfig(allow_insecure_test_keys=True))"
        )
