# The public names of `vfl.party`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .config import (
    PartyConfig as PartyConfig,
)
from .config import (
    load_party_config as load_party_config,
)
from .config import (
    parse_party_config as parse_party_config,
)
from .daemon import DaemonOptions as DaemonOptions
from .daemon import PartyDaemon as PartyDaemon
from .data import Table as Table
from .data import load_table as load_table
from .errors import (
    AccessDenied as AccessDenied,
)
from .errors import (
    CheckpointError as CheckpointError,
)
from .errors import (
    ConfigError as ConfigError,
)
from .errors import (
    DataError as DataError,
)
from .errors import (
    JobError as JobError,
)
from .errors import (
    ModelError as ModelError,
)
from .errors import (
    PartyError as PartyError,
)
from .errors import (
    PeerUnavailable as PeerUnavailable,
)
from .errors import (
    RequestError as RequestError,
)
from .errors import (
    ShuttingDown as ShuttingDown,
)
from .errors import (
    UnknownModel as UnknownModel,
)
from .server import PartyServer as PartyServer
from .server import create_party_server as create_party_server
