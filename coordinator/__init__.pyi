# The public names of `vfl.coordinator`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .client import CoordinatorClient as CoordinatorClient, JobView as JobView
from .doctor import diagnose as diagnose
from .errors import (
    AccessDenied as AccessDenied,
    CoordinatorError as CoordinatorError,
    CoordinatorLost as CoordinatorLost,
    CoordinatorUnavailable as CoordinatorUnavailable,
    PartyUnavailable as PartyUnavailable,
    StoreInUse as StoreInUse,
    UnknownJob as UnknownJob,
    UnknownModel as UnknownModel,
)
from .lifecycle import Lifecycle as Lifecycle
from .server import (
    CoordinatorServer as CoordinatorServer,
    create_coordinator_server as create_coordinator_server,
)
from .store import JobStore as JobStore
