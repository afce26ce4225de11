# The public names of `vfl.party.transport`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .audit import AuditLog as AuditLog, read_audit as read_audit
from .audit_check import leaks as leaks, summarize as summarize
from .grpc_channel import GrpcChannel as GrpcChannel
from .ping import ping_peers as ping_peers
from .scoring import ScoringPeers as ScoringPeers
from .wan import ShapedChannel as ShapedChannel
