"""The coordinator's part of `vfl doctor`: the registered parties, what each says of
itself (version, clock), and whether each reaches every other on the data plane.

Each party is asked `GetPartyInfo`, then `CheckPeers` with the registered addresses of all
the others (it pushes one `ping` envelope to each, as a job's envelopes go); the parties
are asked at once, each call bounded by `CHECK_TIMEOUT_S`. A party that does not answer
gets its error and no data-plane results. What the answers mean, and the fixes, is the
CLI's business (`vfl.cli.doctor`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import grpc
from vfl.coordinator.store import JobStore
from vfl.proto import coordinator_pb2 as pb, party_pb2
from vfl.rpc import VERSION, PeerClients, explain

CHECK_TIMEOUT_S = 10.0  # GetPartyInfo, and CheckPeers (5 s per peer at most, peers in turn)


def check_federation(store: JobStore, clients: PeerClients) -> pb.CheckFederationResponse:
    """Ask every registered party about itself and its peers (see the module doc)."""
    now = time.time()  # the clock to compare: taken as the request arrives
    registered = store.registrations()
    addresses = {p: address for p, (address, _) in registered.items()}
    with ThreadPoolExecutor(max(1, len(registered)), thread_name_prefix="doctor") as pool:
        futures = [
            pool.submit(_check_party, clients, p, address, last_seen, addresses)
            for p, (address, last_seen) in sorted(registered.items())
        ]
    return pb.CheckFederationResponse(
        version=VERSION, time=now, parties=[f.result() for f in futures]
    )


def _check_party(
    clients: PeerClients, party_id: str, address: str, last_seen: float, all_: dict[str, str]
) -> pb.FederationParty:
    out = pb.FederationParty(party_id=party_id, address=address, last_seen=last_seen)
    stub = clients.stub(address, party_id)
    began = time.time()
    try:
        info = stub.GetPartyInfo(party_pb2.GetPartyInfoRequest(), timeout=CHECK_TIMEOUT_S)
    except grpc.RpcError as exc:
        out.error = explain(exc, address, clients.tls is not None, party_id)
        return out
    out.asked_at = (began + time.time()) / 2
    out.version, out.time = info.version, info.time
    peers = [party_pb2.PeerAddress(party_id=p, address=a) for p, a in all_.items() if p != party_id]
    if not peers:
        return out
    timeout = CHECK_TIMEOUT_S + 5.0 * len(peers)
    try:
        answer = stub.CheckPeers(party_pb2.CheckPeersRequest(peers=peers), timeout=timeout)
    except grpc.RpcError as exc:
        out.error = f"CheckPeers: {explain(exc, address, clients.tls is not None, party_id)}"
        return out
    out.peers.extend(answer.peers)
    return out
