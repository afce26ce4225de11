"""Pair seeds of the zero-sum masks, agreed through the active party (K >= 2 passive parties).

Both source layers (MatMul and Embed-MatMul) run this exchange at the end of their setup
(see `secure.source_layers.sharing.ZeroSumMasks` for how the seeds become masks). Tags
under the layer's setup prefix P, for passive parties A_j before A_k in the passive-party
order:

    B -> A_k    P/pk/<A_j>     A_j's public key (every passive party gets every other's)
    A_j -> B    P/seed/<A_k>   a 256-bit seed encrypted under pk_Ak ...
    B -> A_k    P/seed/<A_j>   ... relayed unchanged once B has checked its form

B sees only ciphertexts under keys it does not hold. With one passive party nothing is
sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import PayloadError
from vfl.secure.paillier.cipher_matrix import CipherMatrix
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import PublicKey
from vfl.secure.source_layers.sharing import SEED_BYTES, new_seed, pair_sign
from vfl.secure.wire.ciphertexts import ciphertexts_from_payload, ciphertexts_to_payload
from vfl.secure.wire.keys import public_key_from_payload, public_key_to_payload
from vfl.secure.wire.payload import Payload

PairSeeds = dict[str, tuple[int, bytes]]  # other passive party -> (sign, shared seed)


def seed_payload(seed: bytes, he: Paillier) -> Payload:
    """A pair seed encrypted under the receiving passive party's key."""
    value = he.encrypt([int.from_bytes(seed, "big")])
    return ciphertexts_to_payload(CipherMatrix([value], 1, he.pk, 1, 0))


def seed_from_payload(payload: Payload, own: Paillier) -> bytes:
    """Decrypt a relayed pair seed with our own private key.

    Raises:
        PayloadError: malformed ciphertexts or a value that is not a seed.
    """
    matrix = ciphertexts_from_payload(payload, own.pk, shape=(1, 1), slots=1, scale_bits=0)
    value = own.decrypt(matrix.rows[0])[0]
    if not 0 <= value < 1 << (8 * SEED_BYTES):
        raise PayloadError("a relayed pair seed is out of range; the payload is corrupt")
    return value.to_bytes(SEED_BYTES, "big")


def relay_pair_seeds(
    channel: Channel, prefix: str, keys: dict[str, PublicKey], timeout: float | None
) -> None:
    """Active party: forward public keys, then encrypted pair seeds, between passive parties.

    `keys` maps every passive party, in the passive-party order, to its public key.

    Raises:
        PayloadError, ChannelError: a seed is malformed or missing.
    """
    ids = list(keys)
    for pid in ids:
        for other in ids:
            if other != pid:
                channel.send(pid, f"{prefix}/pk/{other}", public_key_to_payload(keys[other]))
    for j, low in enumerate(ids):
        for high in ids[j + 1 :]:
            payload = channel.recv(low, f"{prefix}/seed/{high}", timeout)
            ciphertexts_from_payload(payload, keys[high], shape=(1, 1), slots=1, scale_bits=0)
            channel.send(high, f"{prefix}/seed/{low}", payload)


def agree_pair_seeds(
    channel: Channel,
    active_id: str,
    prefix: str,
    ids: Sequence[str],
    own: Paillier,
    config: SecureConfig,
) -> PairSeeds:
    """Passive party: agree a seed with every other passive party, relayed by the active one.

    `ids`: every passive party in the passive-party order; `own`: this party's key pair.
    Returns {other party: (+1 if this party comes first in the order else -1, seed)}.

    Raises:
        PayloadError, PaillierKeyError, ChannelError: a relayed key or seed is unusable or
            missing.
    """
    me, timeout, order = channel.party_id, config.timeout_s, list(ids)
    others = [pid for pid in order if pid != me]
    keys = {}
    for pid in others:
        payload = channel.recv(active_id, f"{prefix}/pk/{pid}", timeout)
        keys[pid] = public_key_from_payload(payload, pid, config)
    seeds: PairSeeds = {}
    for pid in others:
        if pair_sign(me, pid, order) > 0:
            seeds[pid] = (1, new_seed())
            payload = seed_payload(seeds[pid][1], Paillier(keys[pid]))
            channel.send(active_id, f"{prefix}/seed/{pid}", payload)
    for pid in others:
        if pair_sign(me, pid, order) < 0:
            payload = channel.recv(active_id, f"{prefix}/seed/{pid}", timeout)
            seeds[pid] = (-1, seed_from_payload(payload, own))
    return seeds
