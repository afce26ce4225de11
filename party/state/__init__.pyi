# The public names of `vfl.party.state`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .checkpoint_file import (
    Checkpoint as Checkpoint,
    decode_checkpoint as decode_checkpoint,
    encode_checkpoint as encode_checkpoint,
)
from .checkpoints import JobCheckpoints as JobCheckpoints
from .model_store import Manifest as Manifest, ModelStore as ModelStore
from .store import StateDir as StateDir
