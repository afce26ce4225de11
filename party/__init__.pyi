# The public names of `vfl.party`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .config import (
    PartyConfig as PartyConfig,
    load_party_config as load_party_config,
    parse_party_config as parse_party_config,
)
from .daemon import DaemonOptions as DaemonOptions, PartyDaemon as PartyDaemon
from .errors import (
    AccessDenied as AccessDenied,
    CheckpointError as CheckpointError,
    ConfigError as ConfigError,
    DataError as DataError,
    JobError as JobError,
    LimitExceeded as LimitExceeded,
    MemoryLimitExceeded as MemoryLimitExceeded,
    ModelError as ModelError,
    PartyBusy as PartyBusy,
    PartyError as PartyError,
    PeerUnavailable as PeerUnavailable,
    RequestError as RequestError,
    ShuttingDown as ShuttingDown,
    UnknownModel as UnknownModel,
)
from .limits import Limits as Limits
from .server import PartyServer as PartyServer, create_party_server as create_party_server
from .tables.load import load_table as load_table
from .tables.table import Table as Table
