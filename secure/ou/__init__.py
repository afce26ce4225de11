"""Okamoto-Uchiyama: keys, the owner's encryption, decryption and re-randomisation.

    keys      `generate_ou_keypair`, `OuPublicKey`, `OuPrivateKey` (the Coron-Naccache-
              Paillier variant; the sizes and why they match Paillier's are in its doc)
    cipher    `OwnerEncryptor` (the owner's CRT encryption), `decrypt`, `Rerandomizer`

Pure arithmetic over gmpy2 integers, like `secure.paillier`: no protobuf, no channel. The
encrypted bucket sums of `secure.histograms` are built on it; its keys' wire form is
`secure.wire.keys`.
"""

from vfl.secure.ou.cipher import (
    OwnerEncryptor,
    Rerandomizer,
    decrypt,
    owner_encryptor,
    rerandomizer,
)
from vfl.secure.ou.keys import (
    OuKeyPair,
    OuPrivateKey,
    OuPublicKey,
    check_key_bits,
    generate_ou_keypair,
)

__all__ = [
    "OuKeyPair",
    "OuPrivateKey",
    "OuPublicKey",
    "OwnerEncryptor",
    "Rerandomizer",
    "check_key_bits",
    "decrypt",
    "generate_ou_keypair",
    "owner_encryptor",
    "rerandomizer",
]
