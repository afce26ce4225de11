"""Exact BFV over SEAL (through TenSEAL's `sealapi`): keys, encryption, plaintext
products, noise flooding, and ciphertexts as bytes.

    ctx = BfvContext(BfvParams())
    own = KeyPair(ctx)                       # this party's secret and public key
    peer = PeerKey(ctx, own.public_bytes)    # a peer's public key, from its bytes
    ct = ctx.ciphertext(own.encrypt(coeffs)) # seeded bytes on the wire, then a Ciphertext
    out = ctx.dot([ct], [ctx.plaintext(p)])  # sum of plaintext x ciphertext products
    wire = ctx.flood(out, peer, bits)        # re-randomised, flooded, switched down: bytes
    ctx.prepare(peer, count, bits)           # blinders for coming floods, made meanwhile
    coeffs = own.decrypt(ctx.ciphertext(wire, last=True))

Coefficients are arrays of N uint64 residues mod t = 2^plain_bits (the plaintext
modulus); `encode`/`centered` convert signed fixed-point integers. Randomness for masks
and flooding comes from the operating system (`os.urandom`), SEAL's own from its PRNG.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import tenseal.sealapi as seal
import vfl.secure.lattice.seal_io as seal_io
from vfl.secure.errors import ConfigError, EncodingError, PayloadError
from vfl.secure.lattice.params import BfvParams
from vfl.secure.paillier.encoding import encode as fixed_point

Ciphertext = Any  # seal.Ciphertext (the binding has no type stubs)
Plaintext = Any


class BfvContext:
    """SEAL's context for `params`, its evaluator and the levels of the modulus chain."""

    def __init__(self, params: BfvParams) -> None:
        """Raises:
        ConfigError: parameters below 128-bit security or that SEAL refuses.
        """
        params.validate()
        self.params = params
        self.degree = params.poly_degree
        self.plain_modulus = 1 << params.plain_bits
        enc = seal.EncryptionParameters(seal.SCHEME_TYPE.BFV)
        enc.set_poly_modulus_degree(self.degree)
        enc.set_coeff_modulus(seal.CoeffModulus.Create(self.degree, list(params.coeff_bits)))
        enc.set_plain_modulus(seal.Modulus(self.plain_modulus))
        self.context = seal.SEALContext(enc, True, seal.SEC_LEVEL_TYPE.TC128)
        message = self.context.parameters_error_message()
        if message != "valid":
            raise ConfigError(f"SEAL refuses the BFV parameters {params}: {message}")
        self.evaluator = seal.Evaluator(self.context)
        self.levels: list[list[int]] = []  # parms_id of each data level, first to last
        self.primes: list[np.ndarray] = []  # their primes
        data = self.context.first_context_data()
        while data is not None:
            self.levels.append(list(data.parms_id()))
            self.primes.append(
                np.array([m.value() for m in data.parms().coeff_modulus()], dtype=np.uint64)
            )
            data = data.next_context_data()
        self.version = seal_io.version(seal_io.save(seal.Plaintext()))

    # plaintexts ---------------------------------------------------------------------

    def plaintext(self, coeffs: np.ndarray) -> Plaintext:
        """A Plaintext of N residues mod t (uint64 or int64 already reduced)."""
        values = np.asarray(coeffs).astype(np.uint64, copy=False)
        plain = seal.Plaintext()
        seal_io.load(plain, self.context, seal_io.plaintext_bytes(self.version, values))
        return plain

    def random_coeffs(self, count: int) -> np.ndarray:
        """`count` x N uniform residues mod t (masks), from the operating system."""
        raw = np.frombuffer(os.urandom(8 * count * self.degree), dtype=np.uint64)
        return (raw & np.uint64(self.plain_modulus - 1)).reshape(count, self.degree)

    # ciphertexts --------------------------------------------------------------------

    def ciphertext(self, data: bytes, *, last: bool = False) -> Ciphertext:
        """A Ciphertext from bytes: a fresh one at the first data level, or (`last`) a
        flooded one at the last.

        Raises:
            PayloadError: not a two-polynomial ciphertext of these parameters at that level.
        """
        ct = seal.Ciphertext()
        seal_io.load(ct, self.context, data)
        level = self.levels[-1] if last else self.levels[0]
        if ct.size() != 2 or list(ct.parms_id()) != level or ct.is_ntt_form():
            raise PayloadError(
                "a BFV ciphertext of the wrong size or level; both parties must use the "
                "same crypto.bfv parameters"
            )
        return ct

    def ntt(self, cts: list[Ciphertext]) -> list[Ciphertext]:
        """The ciphertexts in NTT form (new objects), for `dot`: a ciphertext that is a
        factor of several products is transformed once, not once per product."""
        out = []
        for ct in cts:
            form = seal.Ciphertext()
            self.evaluator.transform_to_ntt(ct, form)
            out.append(form)
        return out

    def dot(self, cts: list[Ciphertext], plains: list[Plaintext]) -> Ciphertext:
        """sum_i plains[i] * cts[i], in coefficient form. With `cts` in NTT form (`ntt`),
        each plaintext is transformed, the products are pointwise and the sum is
        transformed back once: 3 NTTs a product and 6 a sum, against SEAL's 15 a product
        in coefficient form (N = 8192, three primes)."""
        ev, out, term = self.evaluator, seal.Ciphertext(), seal.Ciphertext()
        if not cts[0].is_ntt_form():
            ev.multiply_plain(cts[0], plains[0], out)
            for ct, plain in zip(cts[1:], plains[1:], strict=True):
                ev.multiply_plain(ct, plain, term)
                ev.add_inplace(out, term)
            return out
        level, form = self.levels[0], seal.Plaintext()
        for i, (ct, plain) in enumerate(zip(cts, plains, strict=True)):
            ev.transform_to_ntt(plain, level, form)
            ev.multiply_plain(ct, form, out if i == 0 else term)
            if i:
                ev.add_inplace(out, term)
        ev.transform_from_ntt_inplace(out)
        return out

    def add_plain(self, ct: Ciphertext, plain: Plaintext) -> None:
        self.evaluator.add_plain_inplace(ct, plain)

    def sub_plain(self, ct: Ciphertext, plain: Plaintext) -> None:
        self.evaluator.sub_plain_inplace(ct, plain)

    def sub(self, ct: Ciphertext, other: Ciphertext) -> None:
        self.evaluator.sub_inplace(ct, other)

    def flood(self, ct: Ciphertext, peer: PeerKey, bits: int) -> bytes:
        """Make `ct` (first data level) safe to return to its key's owner, as bytes: add a
        blinder (`blinder`: a fresh encryption of zero under the owner's key, which
        re-randomises both polynomials, plus uniform noise in [-2^bits, 2^bits), which
        floods the noise that depends on this party's plaintexts), and switch down to the
        last level (fewer bytes). A blinder made beforehand (`prepare`) is used once."""
        ev = self.evaluator
        ev.add_inplace(ct, self.blinder(peer, bits))
        ev.mod_switch_to_inplace(ct, self.levels[-1])
        return seal_io.save(ct)

    def blinder(self, peer: PeerKey, bits: int) -> Ciphertext:
        """A fresh encryption of zero under `peer`'s key plus (E, 0), E uniform in
        [-2^bits, 2^bits), at the first data level: one made by `prepare`, else a new one."""
        ready = peer.ready.get(bits)
        if ready:
            return ready.pop()
        ct = peer.zero(self.levels[0])
        self.evaluator.add_inplace(ct, self._noise(bits))
        return ct

    def prepare(self, peer: PeerKey, count: int, bits: int) -> None:
        """Make blinders of `bits` for `peer` until `count` are ready (call it before
        waiting for a peer: they depend on no value)."""
        ready = peer.ready.setdefault(bits, [])
        while len(ready) < count:
            ct = peer.zero(self.levels[0])
            self.evaluator.add_inplace(ct, self._noise(bits))
            ready.append(ct)

    def _noise(self, bits: int) -> Ciphertext:
        """(E, 0) at the first data level, E uniform in [-2^bits, 2^bits)."""
        primes, n = self.primes[0], self.degree
        residues = np.zeros((2, primes.size, n), dtype=np.uint64)
        residues[0] = uniform_residues(bits, n, primes)
        ct = seal.Ciphertext()
        seal_io.load(
            ct, self.context, seal_io.ciphertext_bytes(self.version, self.levels[0], residues)
        )
        return ct

    def to_bytes(self, ct: Ciphertext) -> bytes:
        return seal_io.save(ct)


class KeyPair:
    """A party's own BFV secret key, with its public key and (symmetric) encryptor."""

    def __init__(self, ctx: BfvContext, secret: bytes | None = None) -> None:
        """`secret`: a saved secret key (`secret_bytes`), else a new one.

        Raises:
            PayloadError: `secret` is not a secret key of these parameters.
        """
        self.ctx = ctx
        if secret is None:
            generator = seal.KeyGenerator(ctx.context)
            self._secret = generator.secret_key()
        else:
            self._secret = seal.SecretKey()
            seal_io.load(self._secret, ctx.context, secret)
            generator = seal.KeyGenerator(ctx.context, self._secret)
        public = seal.PublicKey()
        generator.create_public_key(public)
        self.public_bytes = seal_io.save(public)  # sent once per job
        self._encryptor = seal.Encryptor(ctx.context, self._secret)
        self._decryptor = seal.Decryptor(ctx.context, self._secret)

    def secret_bytes(self) -> bytes:
        return seal_io.save(self._secret)

    def encrypt(self, coeffs: np.ndarray) -> bytes:
        """A fresh symmetric encryption of N residues mod t, as seeded bytes (the second
        polynomial travels as its PRNG seed: half the size)."""
        return seal_io.save(self._encryptor.encrypt_symmetric(self.ctx.plaintext(coeffs)))

    def decrypt(self, ct: Ciphertext) -> np.ndarray:
        """The N residues mod t (uint64) of a ciphertext under this key."""
        plain = seal.Plaintext()
        self._decryptor.decrypt(ct, plain)
        return seal_io.plaintext_coeffs(plain, self.ctx.degree)


class PeerKey:
    """A peer's BFV public key: encryptions of zero under it re-randomise ciphertexts that
    return to the peer. `ready`: blinders made beforehand, by flooding width
    (`BfvContext.prepare`), each used once."""

    def __init__(self, ctx: BfvContext, public: bytes) -> None:
        """Raises:
        PayloadError: not a public key of these parameters.
        """
        key = seal.PublicKey()
        seal_io.load(key, ctx.context, public)
        self.public_bytes = public
        self._encryptor = seal.Encryptor(ctx.context, key)
        self.ready: dict[int, list[Ciphertext]] = {}

    def zero(self, parms_id: list[int]) -> Ciphertext:
        """A fresh encryption of zero at `parms_id`."""
        ct = seal.Ciphertext()
        self._encryptor.encrypt_zero(parms_id, ct)
        return ct


def uniform_residues(bits: int, n: int, primes: np.ndarray) -> np.ndarray:
    """Residues mod each prime (< 2^60) of n integers uniform in [-2^bits, 2^bits), drawn
    from the operating system: E = E1 2^60 + E0 with E0 uniform in [0, 2^60)."""
    if not 1 <= bits <= 120:
        raise ConfigError(f"flooding noise of {bits} bits is outside 1..120")
    low_bits = min(bits + 1, 60)
    e0 = _urandom(n) >> np.uint64(64 - low_bits)  # uniform in [0, 2^low_bits)
    if bits + 1 <= 60:
        e1_abs, negative = np.zeros(n, dtype=np.uint64), np.zeros(n, dtype=bool)
        shift = np.int64(1) << np.int64(bits)  # E = e0 - 2^bits
        signed = e0.astype(np.int64) - shift
        out = np.empty((primes.size, n), dtype=np.uint64)
        for i, q in enumerate(primes.astype(np.int64)):
            out[i] = np.mod(signed, q).astype(np.uint64)
        return out
    high = _urandom(n) >> np.uint64(64 - (bits + 1 - 60))  # [0, 2^(bits+1-60))
    e1 = high.astype(np.int64) - (np.int64(1) << np.int64(bits - 60))  # [-2^(b-60), 2^(b-60))
    negative, e1_abs = e1 < 0, np.abs(e1).astype(np.uint64)
    out = np.empty((primes.size, n), dtype=np.uint64)
    for i, q in enumerate(primes):
        c = (1 << 60) % int(q)  # 2^60 mod q: small for SEAL's primes just below 2^60
        if c.bit_length() + bits - 60 <= 63:
            r = (e1_abs * np.uint64(c)) % q
        else:
            r = e1_abs % q
            for _ in range(15):  # r * 2^60 mod q, four bits at a time (r < q < 2^60)
                r = (r << np.uint64(4)) % q
        r = np.where(negative, (q - r) % q, r)
        out[i] = (r + e0 % q) % q
    return out


def _urandom(n: int) -> np.ndarray:
    return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()


def encode(values: np.ndarray, scale_bits: int, limit_bits: int, what: str) -> np.ndarray:
    """Signed fixed-point integers round(v 2^scale_bits), each below 2^limit_bits in
    magnitude.

    Raises:
        EncodingError: a value does not fit, named by `what`.
    """
    worst = float(np.abs(values).max()) if np.size(values) else 0.0
    if worst >= float(2 ** (limit_bits - scale_bits)):
        raise EncodingError(
            f"{what}: |{worst:.4g}| does not fit 2^{limit_bits - scale_bits} at scale "
            f"2^-{scale_bits}; rescale the values or lower their fixed-point scale"
        )
    scaled = fixed_point(values, scale_bits)  # NaN and infinity refused there
    if scaled.size and int(np.abs(scaled).max()) >= 1 << limit_bits:  # rounded up to it
        raise EncodingError(f"{what}: a value rounds to 2^{limit_bits} at scale 2^-{scale_bits}")
    return scaled


def to_residues(ints: np.ndarray, plain_bits: int) -> np.ndarray:
    """Signed integers as residues mod 2^plain_bits (two's complement, masked)."""
    return (np.asarray(ints, dtype=np.int64).view(np.uint64)) & np.uint64((1 << plain_bits) - 1)


def centered(residues: np.ndarray, plain_bits: int) -> np.ndarray:
    """Residues mod 2^plain_bits as signed integers in [-2^(plain_bits-1), 2^(plain_bits-1))."""
    r = np.asarray(residues, dtype=np.uint64).astype(np.int64)
    half = np.int64(1) << np.int64(plain_bits - 1)
    return np.where(r >= half, r - (half << np.int64(1)), r)
