"""The active party (B) of the Embed-MatMul layer: holds [[W]]_A and [[W^T]]_A per passive
party, and G; learns only the layer output (the sum over passive parties when K >= 2).

Forward, per passive party A_k, then once:
    e_k = [[E^B - R]]_B         <-  A_k   B decrypts E'_B = E^B - R (R: A_k's per-slot mask)
    c_k = [[E'_B W - M_k]]_A    ->  A_k   (M_k: mask over the whole packed row)
    z_k = [[E'_A W + E'_B W - M_k (+ zero-sum mask)]]_B  <-  A_k
    Z = Dec(prod_k z_k) + sum_k M_k
Backward, with lr*G at scale f_G:
    m3 = [[lr G]]_B, pb = [[-E'_B^T lr G]]_B                      ->  A_k
    de = [[lr G W^T - S]]_A (from [[W^T]]_A, before the update)  ->  A_k
    st = [[-round(S / 2^trunc)]]_B, one ciphertext per (row, field segment)  ->  A_k
    y = [[-dW - Phi]]_B, phi = [[Phi]]_A, phit = [[Phi^T]]_A  <-  A_k
    [[W]]_A and [[W^T]]_A += [[Phi]]_A + (-dW - Phi)   (Phi: A_k's per-slot mask)
"""

from __future__ import annotations

import logging

import numpy as np
from gmpy2 import mpz
from vfl.secure.channel import Channel
from vfl.secure.config import SecureConfig
from vfl.secure.errors import ConfigError, PayloadError, SecureError, StateError
from vfl.secure.paillier.encoding import decode, encode, to_signed
from vfl.secure.paillier.engine import Paillier
from vfl.secure.paillier.keys import KeyPair
from vfl.secure.source_layers.checks import check_passive_ids, check_step, initial_share
from vfl.secure.source_layers.common import InitialShares, Pending, flat, shaped
from vfl.secure.source_layers.embed.common import encode_table, encrypt_rows, initial_tables
from vfl.secure.source_layers.embed.link import PassiveLink
from vfl.secure.source_layers.embed.setup import (
    EmbedParams,
    check_vocab,
    vocab_from_payload,
    vocab_payload,
)
from vfl.secure.source_layers.embed.tables import table_rows
from vfl.secure.source_layers.role import LayerRole
from vfl.secure.source_layers.seeds import relay_pair_seeds
from vfl.secure.source_layers.sharing import private_rng
from vfl.secure.source_layers.state import (
    LayerState,
    public_key_from_state,
    reading,
)
from vfl.secure.wire.ciphertexts import ciphertexts_to_payload
from vfl.secure.wire.keys import public_key_from_payload, public_key_to_payload

log = logging.getLogger(__name__)


class ActiveEmbedLayer(LayerRole[EmbedParams]):
    """Party B's side of the Embed-MatMul layer (see `secure.source_layers.embed`)."""

    _params_type = EmbedParams
    _saved_as = "the saved state of the active Embed-MatMul layer"

    def __init__(
        self,
        channel: Channel,
        passive_ids: list[str],
        fields_per_passive: dict[str, list[int]],
        emb_dim: int,
        out_dim: int,
        config: SecureConfig,
        seed: int,
        init: InitialShares | None = None,
        *,
        keypair: KeyPair | None = None,
    ) -> None:
        """`fields_per_passive` maps each passive party to its fields' vocabulary sizes.
        `init` (tests only): "Q_B/<id>" (one V_f x emb_dim table per field) and "W_B/<id>"
        (F*k x out_dim) initial shares. `keypair`: e.g. the MatMul layer's key pair.

        Raises:
            ConfigError: empty or duplicate passive ids, fields missing, bad dimensions,
                or a configuration without room for this layer's scales.
            PaillierKeyError: no key pair given and the configured key size is too small.
        """
        ids = check_passive_ids(channel, passive_ids)
        if set(fields_per_passive) != set(ids):
            raise ConfigError("fields_per_passive must name exactly the passive parties")
        self.emb_dim, self.out_dim = emb_dim, out_dim
        self.params = EmbedParams.for_active(config, emb_dim, out_dim, ids)
        self.fields = {pid: check_vocab(fields_per_passive[pid], emb_dim) for pid in ids}
        self.h_lay = self.params.h_layout()
        super().__init__(channel, config, seed, init, keypair, own_pool=True)
        self._ids = ids
        self._links: dict[str, PassiveLink] = {}
        # per forward step: every passive party's share E'_B of the looked-up embeddings
        self._pending: Pending[dict[str, np.ndarray]] = Pending("run forward() first")

    def setup(self, tag_prefix: str) -> None:
        """Exchange keys and parameters with every passive party and initialise the shares.

        Raises:
            PayloadError, PaillierKeyError, ChannelError: a peer sent something unusable or
                nothing at all.
            InputError, EncodingError: an initial share is malformed or too large.
        """
        own, p, timeout = self._crypto.own, tag_prefix, self.config.timeout_s
        for pid in self._ids:
            self.channel.send(pid, f"{p}/pk", public_key_to_payload(own.pk))
            self.channel.send(pid, f"{p}/params", self.params.to_payload())
            vocab = vocab_payload(self.fields[pid], self.config.key_bits)
            self.channel.send(pid, f"{p}/vocab", vocab)
        peers = {pid: self._receive_peer(pid, p) for pid in self._ids}
        w_b = {pid: self._send_shares(pid, p) for pid in self._ids}
        relay_pair_seeds(self.channel, p, {pid: he.pk for pid, he in peers.items()}, timeout)
        for pid, he in peers.items():
            link = self._new_link(pid, he)
            link.receive_weights(p, w_b[pid])
            self._links[pid] = link
        log.info("active embed layer %s: setup with %d passive parties", p, len(peers))

    def _receive_peer(self, pid: str, p: str) -> Paillier:
        timeout = self.config.timeout_s
        key = public_key_from_payload(self.channel.recv(pid, f"{p}/pk", timeout), pid, self.config)
        sizes, key_bits = vocab_from_payload(self.channel.recv(pid, f"{p}/params", timeout), pid)
        if sizes != self.fields[pid] or key_bits != self.params.key_bits:
            raise PayloadError(
                f"party '{pid}' announced {len(sizes)} fields of sizes {list(sizes)} and "
                f"{key_bits}-bit keys; expected {list(self.fields[pid])} and "
                f"{self.params.key_bits} bits"
            )
        return self._crypto.add_peer(key)

    def _send_shares(self, pid: str, p: str) -> np.ndarray:
        """Send [[Q^B_f]]_B (every table, in storage form) and [[W^B]]_B; return W^B."""
        own, prm, sizes = self._crypto.own, self.params, self.fields[pid]
        rng = private_rng(self.seed, self._crypto.keypair.private, f"embed-active/{pid}")
        tables = initial_tables(self._init, f"Q_B/{pid}", sizes, self.emb_dim, rng)
        lay = prm.e_layout(len(sizes))
        for f, table in enumerate(tables):
            rows = table_rows(lay, f, encode_table(table, prm.feature_bits, prm.e_bits))
            cipher = encrypt_rows(own, rows, lay.slots, prm.feature_bits)
            self.channel.send(pid, f"{p}/q_b/{f}", ciphertexts_to_payload(cipher))
        w_b = initial_share(self._init, f"W_B/{pid}", lay.width, self.out_dim, rng)
        w_b = encode(w_b, prm.weight_bits)
        packed = self.h_lay.pack(w_b.tolist())
        cipher = encrypt_rows(own, packed, self.h_lay.slots, prm.weight_bits)
        self.channel.send(pid, f"{p}/w_b", ciphertexts_to_payload(cipher))
        return w_b

    def forward(self, tag: str) -> np.ndarray:
        """Run the forward exchange and return Z_emb = sum_k E_k W_k (N x out_dim float64).

        Raises:
            PayloadError, ChannelError: a passive party's message is bad or missing, or
                the passive parties disagree on the batch size.
            SecureError: setup() has not run, or an embedding share left its slot range.
        """
        self._require_setup()
        own, shares, masks, n = self._crypto.own, {}, [], None
        for pid, link in self._links.items():
            shares[pid] = link.receive_embeddings(tag, own, n)
            n = len(shares[pid])
            masks.append(link.send_cross_term(tag, shares[pid]))
        cols, slots, f_z = self.h_lay.cols, self.h_lay.slots, self.params.output_bits
        total: list[mpz] = []
        for link in self._links.values():
            z = flat(link.wire.recv(f"{tag}/z", own.pk, (n, cols), slots, f_z).rows)
            total = own.add(total, z) if total else z
        mask_sum = [sum(values) for values in zip(*masks, strict=True)]
        plain = zip(own.decrypt(total), mask_sum, strict=True)
        packed = [to_signed(a + m, own.pk.n) for a, m in plain]
        z_int = self.h_lay.unpack(shaped(packed, cols))
        self._pending.remember(tag, shares)
        return decode(np.array(z_int, dtype=np.float64), f_z)

    def backward(self, tag: str, grad_z: np.ndarray, lr: float) -> None:
        """Send the encrypted step of forward step `tag` (else the latest) to every passive
        party and update B's encrypted copies of W with their answers.

        Raises:
            InputError: grad_z of the wrong shape or non-finite, lr not positive.
            EncodingError: lr * grad_z too large for its scale.
            PayloadError, ChannelError: a passive party's answer is bad or missing.
            SecureError: setup() has not run, or no forward step is pending.
        """
        self._require_setup()
        shares = self._pending.take(tag)
        n = len(shares[self._ids[0]])
        g = encode(check_step(grad_z, lr, (n, self.out_dim)), self.params.grad_bits)
        own, slots = self._crypto.own, self.h_lay.slots
        m3 = encrypt_rows(own, self.h_lay.pack(g.tolist()), slots, self.params.grad_bits)
        masks = {}
        for pid, link in self._links.items():
            link.wire.send(f"{tag}/m3", m3)
            masks[pid] = link.send_steps(tag, own, shares[pid], g)
        for pid, link in self._links.items():  # every de out before the first st
            link.send_table_step(tag, own, masks[pid])
        for link in self._links.values():
            link.apply_weight_step(tag, own)

    def _saved(self) -> tuple[EmbedParams, LayerState]:
        """Per passive party its fields' vocabulary sizes, and its public key, [[W]]_A and
        [[W^T]]_A (`PassiveLink.state_dict`).

        Raises:
            SecureError: setup() has not run.
        """
        self._require_setup()
        return self.params, {
            "fields": {pid: list(sizes) for pid, sizes in self.fields.items()},
            "links": {pid: link.state_dict() for pid, link in self._links.items()},
        }

    def _started(self) -> bool:
        return bool(self._links)

    def _load_saved(self, params: EmbedParams, state: LayerState) -> None:
        what = self._saved_as
        with reading(what):
            fields = {pid: tuple(int(v) for v in sizes) for pid, sizes in state["fields"].items()}
            if params != self.params or fields != self.fields:
                raise StateError(f"{what} is of another layer, configuration or vocabulary")
            links = {pid: self._load_link(pid, state["links"][pid], what) for pid in self._ids}
        self._links = links

    def _load_link(self, pid: str, saved: LayerState, what: str) -> PassiveLink:
        key = public_key_from_state(saved["key"], pid, self.config)
        link = self._new_link(pid, self._crypto.add_peer(key))
        link.load_state_dict(saved, what)
        return link

    def _new_link(self, pid: str, he: Paillier) -> PassiveLink:
        """The link to passive party `pid` (`he`: its key's context), without weights yet."""
        fields = len(self.fields[pid])
        return PassiveLink(self._wire_to(pid), he, self.params, fields, self._crypto.matmul)

    def _require_setup(self) -> None:
        """Raises:
        SecureError: setup() (or load_state_dict()) has not run.
        """
        if len(self._links) != len(self._ids):
            raise SecureError("call setup() before forward() or backward()")
