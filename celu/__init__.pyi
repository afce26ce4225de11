# The public names of `vfl.celu`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .config import LocalUpdateConfig as LocalUpdateConfig
from .errors import CeluError as CeluError, LocalUpdateConfigError as LocalUpdateConfigError
from .local_loop import LocalUpdater as LocalUpdater
from .sampling import UniformSampler as UniformSampler
from .weighting import instance_weights as instance_weights
from .workset import CachedBatch as CachedBatch, WorksetTable as WorksetTable
