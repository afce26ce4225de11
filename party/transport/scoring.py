"""The active party's control calls to the passive parties of an online scoring session:
`OpenScoring` and `CloseScoring` on each passive party's daemon (with TLS, the passive
party's certificate must name it, and it accepts the calls only from the model's active
party)."""

from __future__ import annotations

import logging

import grpc
from vfl.party.errors import ModelError, PeerUnavailable
from vfl.proto import party_pb2 as pb
from vfl.rpc import PeerClients, explain

log = logging.getLogger(__name__)

_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
OPEN_TIMEOUT_S = 120.0  # a passive party loads its part and its rows while it opens
CONNECT_S = 2.0  # longest wait for the channel to a passive party: an online request
# fails fast instead; a restarted party is reached once the channel reconnects (<= 5 s)


class ScoringPeers:
    """Opens and closes scoring sessions at passive parties over the daemon's channels.

    Args:
        timeout: online scoring's timeout; waits for a connection up to min(it, 2 s).
    """

    def __init__(self, clients: PeerClients, timeout: float) -> None:
        self._clients, self._timeout = clients, timeout
        self._connect = min(timeout, CONNECT_S)

    def open(self, peer: str, address: str, model_id: str, session_id: str, reply_to: str) -> None:
        """Ask party `peer` at `address` to score with `model_id` in session `session_id`,
        answering to `reply_to`.

        Raises:
            PeerUnavailable: the party did not answer.
            ModelError: it refused (no such model, data that does not fit, not allowed).
        """
        request = pb.OpenScoringRequest(model_id=model_id, session_id=session_id, reply_to=reply_to)
        if not self._clients.ready(address, peer, self._connect):
            raise PeerUnavailable(
                f"party '{peer}' at {address} is not reachable to score with model "
                f"{model_id}; retry once its daemon is up"
            )
        try:
            self._clients.stub(address, peer).OpenScoring(request, timeout=OPEN_TIMEOUT_S)
        except grpc.RpcError as exc:
            why = explain(exc, address, self._clients.tls, peer)
            if exc.code() in _TRANSIENT:
                raise PeerUnavailable(
                    f"party '{peer}' did not answer to score with model {model_id} ({why}); "
                    "retry once it is up"
                ) from None
            raise ModelError(f"party '{peer}' cannot score with model {model_id}: {why}") from None

    def close(self, peer: str, address: str, session_id: str, reason: str) -> None:
        """Tell party `peer` that session `session_id` ended (best effort: a party that
        does not hear it drops the session once idle)."""
        request = pb.CloseScoringRequest(session_id=session_id, reason=reason)
        try:
            self._clients.stub(address, peer).CloseScoring(request, timeout=self._timeout)
        except (grpc.RpcError, ValueError) as exc:  # ValueError: the daemon closed its channels
            log.info("party '%s' did not take the end of session %s: %s", peer, session_id, exc)
