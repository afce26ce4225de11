"""gRPC plumbing shared by both daemons and the CLI, in six modules:

    dial      the client side: message limits, dialing, channel caches, failures explained
    serve     the server side: servers, binding with mutual TLS, requests that do not parse
    identity  who is calling and who we are: TLS identities, callers' certificates, version
    status    errors to statuses: how a servicer answers a call that failed
    planes    a thread pool per kind of call, and refusals (RESOURCE_EXHAUSTED) beyond one
    streams   client streams: the calls one caller holds at once, stalled streams cancelled

Party daemons serve on thread pools, one per plane (`make_server`, `PlaneRouter`); the
coordinator serves on `grpc.aio` (`make_aio_server`), so that clients following jobs hold
no thread. Every servicer helper
that answers with a status has both forms, sharing one decision: `check_caller` /
`check_caller_async`, `call_with_status` / `call_with_status_async`, and `ParseCheck` /
`AioParseCheck`. Callers import the names from here.
"""

from vfl.rpc.dial import (
    CHUNK_BYTES,
    MAX_MESSAGE_BYTES,
    MAX_RECONNECT_BACKOFF_MS,
    ChannelCache,
    PeerClients,
    channel_options,
    dial,
    explain,
    handshake_failed,
    host_of,
)
from vfl.rpc.identity import (
    COORDINATOR_ID,
    VERSION,
    Tls,
    caller_party,
    check_caller,
    check_caller_async,
    identify_caller_async,
    watch,
)
from vfl.rpc.planes import (
    PLANE_KEY,
    RETRY_AFTER_KEY,
    Plane,
    PlaneRouter,
    busy_message,
    retry_after_s,
    retry_metadata,
)
from vfl.rpc.serve import (
    AioParseCheck,
    ParseCheck,
    bind,
    make_aio_server,
    make_server,
    server_credentials,
)
from vfl.rpc.status import (
    Codes,
    Problem,
    call_with_status,
    call_with_status_async,
    status_of,
)
from vfl.rpc.streams import CallerSlots, Stalled, StreamWatch, caller_of

__all__ = [
    "CHUNK_BYTES",
    "COORDINATOR_ID",
    "MAX_MESSAGE_BYTES",
    "MAX_RECONNECT_BACKOFF_MS",
    "PLANE_KEY",
    "RETRY_AFTER_KEY",
    "VERSION",
    "AioParseCheck",
    "CallerSlots",
    "ChannelCache",
    "Codes",
    "ParseCheck",
    "Plane",
    "PlaneRouter",
    "PeerClients",
    "Problem",
    "Stalled",
    "StreamWatch",
    "Tls",
    "bind",
    "busy_message",
    "call_with_status",
    "call_with_status_async",
    "caller_of",
    "caller_party",
    "channel_options",
    "check_caller",
    "check_caller_async",
    "dial",
    "explain",
    "handshake_failed",
    "host_of",
    "identify_caller_async",
    "make_aio_server",
    "make_server",
    "retry_after_s",
    "retry_metadata",
    "server_credentials",
    "status_of",
    "watch",
]
