"""`OpCounts`: how many homomorphic operations one party's engine did, as plain integers.

The engine (`secure.paillier.engine.Paillier`) counts encryptions, re-randomisations (a
fresh obfuscator on a computed ciphertext before it leaves) and decryptions, the
ciphertext matrix product (`secure.paillier.cipher_matmul.CipherMatmul`) counts its
ciphertext-by-integer products (one per nonzero term of E times each ciphertext column).
Whoever owns the counts reads them with `snapshot`: the party daemon exports them as
Prometheus counters (`party.metrics`); `secure/` imports neither prometheus nor grpc.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class OpCounts:
    """Running totals, safe to add to from several threads."""

    encryptions: int = 0
    rerandomizations: int = 0
    decryptions: int = 0
    products: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(
        self,
        encryptions: int = 0,
        decryptions: int = 0,
        products: int = 0,
        rerandomizations: int = 0,
    ) -> None:
        with self._lock:
            self.encryptions += encryptions
            self.rerandomizations += rerandomizations
            self.decryptions += decryptions
            self.products += products

    def snapshot(self) -> dict[str, int]:
        """{"encryptions": ..., "rerandomizations": ..., "decryptions": ..., "products":
        ...} at this moment."""
        with self._lock:
            return {
                "encryptions": self.encryptions,
                "rerandomizations": self.rerandomizations,
                "decryptions": self.decryptions,
                "products": self.products,
            }
