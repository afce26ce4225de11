# The public names of `vfl.party.state`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .checkpoint import (
    Checkpoint as Checkpoint,
)
from .checkpoint import (
    decode_checkpoint as decode_checkpoint,
)
from .checkpoint import (
    encode_checkpoint as encode_checkpoint,
)
from .checkpoints import JobCheckpoints as JobCheckpoints
from .models import Manifest as Manifest
from .models import ModelStore as ModelStore
from .store import StateDir as StateDir
