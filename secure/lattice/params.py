"""BFV parameters and their checks against the homomorphic encryption standard.

The standard (homomorphicencryption.org, 2018; SEAL's `CoeffModulus.MaxBitCount`) bounds
the total coefficient-modulus bits for 128-bit classical security with a ternary secret:

    N      1024  2048  4096  8192  16384  32768
    bits     27    54   109   218    438    881

The default, N = 8192 with primes of 60, 60, 60 and 38 bits (218 bits), sits exactly on
that bound. The last prime is SEAL's special prime (it only lowers the noise of public-key
encryptions); ciphertexts live below it: the products at the first data level (180 bits),
the ciphertexts that cross back to their key's owner at the last level (one 60-bit
prime) after noise flooding.
"""

from __future__ import annotations

from dataclasses import dataclass

from vfl.secure.errors import ConfigError

MAX_BITS_128 = {1024: 27, 2048: 54, 4096: 109, 8192: 218, 16384: 438, 32768: 881}
MIN_STAT_BITS = 40
NOISE_BITS = 5  # |e| of a fresh symmetric encryption: SEAL clips its CBD at 6 sigma = 19.2


@dataclass(frozen=True)
class BfvParams:
    """Args:
    poly_degree: the ring degree N (a power of two, 1024..32768).
    coeff_bits: bits of each prime of the coefficient modulus, the special prime last.
    plain_bits: the plaintext modulus is 2^plain_bits; fixed-point values read back
        satisfy |v| < 2^(plain_bits - 1 - scale).
    stat_bits: statistical security of noise flooding (>= 40).
    """

    poly_degree: int = 8192
    coeff_bits: tuple[int, ...] = (60, 60, 60, 38)
    plain_bits: int = 41
    stat_bits: int = 40

    def validate(self) -> None:
        """Raises:
        ConfigError: below 128-bit security, or sizes SEAL cannot use; the message names
            the field and the fix.
        """
        n = self.poly_degree
        if n not in MAX_BITS_128:
            raise ConfigError(
                f"crypto.bfv.poly_degree must be one of {sorted(MAX_BITS_128)}, got {n}"
            )
        total, bound = sum(self.coeff_bits), MAX_BITS_128[n]
        if total > bound:
            raise ConfigError(
                f"crypto.bfv.coeff_bits {list(self.coeff_bits)} total {total} bits, above the "
                f"{bound} bits that give 128-bit security at N = {n} (homomorphic encryption "
                f"standard); use fewer or smaller primes, or a larger poly_degree"
            )
        if len(self.coeff_bits) < 3 or any(not 20 <= b <= 60 for b in self.coeff_bits):
            raise ConfigError(
                "crypto.bfv.coeff_bits needs at least 3 primes of 20..60 bits (two data "
                f"levels and the special prime), got {list(self.coeff_bits)}"
            )
        if not 2 <= self.plain_bits <= 60:
            raise ConfigError(f"crypto.bfv.plain_bits must be in [2, 60], got {self.plain_bits}")
        if self.stat_bits < MIN_STAT_BITS:
            raise ConfigError(
                f"crypto.bfv.stat_bits must be >= {MIN_STAT_BITS} (noise flooding), "
                f"got {self.stat_bits}"
            )

    @property
    def data_bits(self) -> int:
        """Bits of the modulus at the first data level (every prime but the special one)."""
        return sum(self.coeff_bits[:-1])

    @property
    def last_bits(self) -> int:
        """Bits of the modulus at the last level, where flooded ciphertexts cross."""
        return self.coeff_bits[0]

    def flood_bits(self, noise_bits: int) -> int:
        """Bits of the uniform flooding noise over a noise bound of 2^noise_bits: the
        statistical distance of a flooded ciphertext is at most N 2^-(bits - noise_bits)
        (N coefficients), so bits = noise_bits + stat_bits + log2 N gives 2^-stat_bits.

        Raises:
            ConfigError: the flooded noise would not decrypt at the first data level.
        """
        bits = noise_bits + self.stat_bits + self.poly_degree.bit_length() - 1
        if bits + self.plain_bits + 3 > self.data_bits:
            raise ConfigError(
                f"noise flooding needs {bits} bits over a noise bound of 2^{noise_bits}, and "
                f"a {self.plain_bits}-bit plaintext; {self.data_bits} data bits cannot hold "
                f"both: give crypto.bfv.coeff_bits more bits (a larger crypto.bfv.poly_degree "
                f"allows more), or lower train.batch_size"
            )
        return bits
