# The public names of `vfl.coordinator.ui`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .dashboard import Dashboard as Dashboard
from .server import UiServer as UiServer, parse_listen as parse_listen
