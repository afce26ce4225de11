"""A party's wires: the gRPC data plane and what is checked on it.

GrpcChannel      the data plane, a `secure.channel.Channel` over gRPC (`grpc_channel`)
ShapedChannel    a channel with an emulated WAN link (`wan`)
AuditLog, read_audit    the wire audit of every envelope (`audit`)
summarize, leaks        reading an audit: per direction, plaintext found (`audit_check`)
ScoringPeers     the active party's calls to the passive ones of a scoring session
ping_peers       `vfl doctor`'s data-plane probe (`ping`)
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
