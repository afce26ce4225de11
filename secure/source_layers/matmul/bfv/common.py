"""What both roles of the BFV MatMul layer share: the party's keys and context, its
private share generator, and features as fixed-point integers."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from vfl.proto import common_pb2
from vfl.secure.channel import Channel
from vfl.secure.errors import SecureError, StateError
from vfl.secure.lattice.bfv import BfvContext, KeyPair, PeerKey, Plaintext, encode, to_residues
from vfl.secure.source_layers.common import Features
from vfl.secure.source_layers.matmul.bfv.setup import BfvLayerParams, x_bits
from vfl.secure.source_layers.matmul.bfv.wire import blobs_from_payload, blobs_to_payload
from vfl.secure.source_layers.sharing import secret_rng

Payload = common_pb2.Payload


def generate_keys(ctx: BfvContext, owner: str) -> KeyPair:
    """A fresh BFV key pair for party `owner`, made at setup (once per job; a resumed
    layer loads its own from its checkpoint). Tests pin keys here by owner."""
    return KeyPair(ctx)


def share_rng(seed: int, keys: KeyPair, label: str) -> np.random.Generator:
    """`sharing.secret_rng` of the party's BFV secret key: a peer that knows the seed
    cannot recompute the shares."""
    return secret_rng("vfl-bfv-share", seed, label, keys.secret_bytes())


def feature_ints(x: Features, feature_bits: int, who: str, extra_bits: int = 0) -> np.ndarray:
    """A checked batch as dense fixed-point integers within the layer's feature range.

    Raises:
        EncodingError: a feature beyond the range (the message names the party).
    """
    dense = sp.csr_matrix(x).toarray() if sp.issparse(x) else np.asarray(x)
    limit = x_bits(feature_bits) + extra_bits
    return encode(dense, feature_bits, limit, f"a feature of the {who} party")


def plaintexts(ctx: BfvContext, polys: np.ndarray) -> list[Plaintext]:
    """Signed integer polynomials (... x N) as Plaintexts, flattened in order."""
    flat = polys.reshape(-1, ctx.degree)
    return [ctx.plaintext(to_residues(p, ctx.params.plain_bits)) for p in flat]


def send_blobs(channel: Channel, peer: str, tag: str, blobs: list[bytes], owner: str) -> None:
    channel.send(peer, tag, blobs_to_payload(blobs, owner))


def recv_blobs(
    channel: Channel, peer: str, tag: str, owner: str, count: int | None = None
) -> list[bytes]:
    return blobs_from_payload(channel.recv(peer, tag), owner, count)


class NoRowSets:
    """What both BFV roles answer of the row sets the Paillier layer precomputes m1 for:
    none (module doc of `setup`: BFV makes no m1 once per row)."""

    def precompute_pays(self, uses: int) -> bool:
        """Never."""
        return False

    def precompute(self, tag: str, name: str, rows: object) -> None:
        """Raises:
        SecureError: always (`precompute_pays` is False).
        """
        raise SecureError("the BFV MatMul layer makes no m1 once per row")

    def rows_state(self) -> dict[str, object]:
        return {}

    def load_rows_state(self, state: dict[str, object]) -> None:
        """Nothing to load."""


def saved_params(state: dict[str, object]) -> BfvLayerParams:
    """The parameters a BFV layer's `state_dict` was saved with, read under the
    `reading` guard of the caller.

    Raises:
        StateError: the state is a Paillier layer's (the job's scheme changed).
    """
    if state.get("scheme") != "bfv":
        raise StateError("the checkpoint holds a Paillier layer, the job runs bfv")
    fields = state["params"]
    if not isinstance(fields, dict):
        raise StateError("the BFV layer's state holds no parameters")
    return BfvLayerParams.from_fields(dict(fields))


def key_state(keys: KeyPair, peer: PeerKey, params: BfvLayerParams) -> dict[str, object]:
    """What every BFV role's `state_dict` holds first: the scheme, its own secret key, the
    peer's public key and the layer's parameters (`saved_params` reads them back)."""
    return {
        "scheme": "bfv",
        "secret": keys.secret_bytes(),
        "peer_public": peer.public_bytes,
        "params": params.to_fields(),
    }
