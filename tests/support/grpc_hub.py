"""`GrpcHub`: the `InProcessHub` interface over real gRPC servers on OS-chosen ports.

Each `channel(party_id)` starts a gRPC server with the real `PartyServicer` and returns a
real `GrpcChannel`, so protocol tests can run unchanged over the network stack. The only
part not under test is the daemon's job bookkeeping: a tiny receiver drops every envelope
into the party's `Mailbox`.
"""

from __future__ import annotations

from vfl.party.servicer import PartyServicer
from vfl.party.transport.endpoint import Arrival
from vfl.party.transport.grpc_channel import GrpcChannel
from vfl.proto import party_pb2_grpc
from vfl.rpc import PeerClients, bind, make_server
from vfl.secure.channel import EnvelopeHook, Mailbox


class _Receiver:
    def __init__(self, party_id: str, mailbox: Mailbox) -> None:
        self.party_id, self.mailbox = party_id, mailbox

    def admit(self, job_id: str, sender: str, receiver: str, tag: str, size: int) -> Arrival | None:
        if not self.mailbox.reserve(sender, tag, size):
            return None
        box = self.mailbox
        return Arrival(lambda data: box.fill(sender, tag, data), lambda: box.cancel(sender, tag))


class GrpcHub:
    def __init__(self, job_id: str = "job") -> None:
        self.job_id = job_id
        self.addresses: dict[str, str] = {}
        self.clients = PeerClients()
        self._servers = []

    def channel(self, party_id: str, hook: EnvelopeHook | None = None) -> GrpcChannel:
        mailbox = Mailbox()
        server = make_server(max_workers=8)
        party_pb2_grpc.add_PartyServiceServicer_to_server(
            PartyServicer(_Receiver(party_id, mailbox)), server
        )
        port = bind(server, "127.0.0.1:0")
        server.start()
        self._servers.append(server)
        self.addresses[party_id] = f"127.0.0.1:{port}"
        return GrpcChannel(
            party_id, self.job_id, mailbox, self.addresses, self.clients, hook=hook, send_timeout=30
        )

    def close(self) -> None:
        for server in self._servers:
            server.stop(0)
        self.clients.close()
