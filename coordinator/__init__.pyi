# The public names of `vfl.coordinator`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .client import CoordinatorClient as CoordinatorClient
from .client import JobView as JobView
from .doctor import diagnose as diagnose
from .errors import (
    AccessDenied as AccessDenied,
)
from .errors import (
    CoordinatorError as CoordinatorError,
)
from .errors import (
    CoordinatorLost as CoordinatorLost,
)
from .errors import (
    PartyUnavailable as PartyUnavailable,
)
from .errors import (
    StoreInUse as StoreInUse,
)
from .errors import (
    UnknownJob as UnknownJob,
)
from .errors import (
    UnknownModel as UnknownModel,
)
from .lifecycle import Lifecycle as Lifecycle
from .server import (
    CoordinatorServer as CoordinatorServer,
)
from .server import (
    create_coordinator_server as create_coordinator_server,
)
from .store import JobStore as JobStore
