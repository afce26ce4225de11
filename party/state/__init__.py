"""A party's state directory: its checkpoints (and key material) per job, on its own disk.

<state_dir>/jobs/<job_id>/round-000120.ckpt    newest two kept, written atomically
"""

from vfl.party.state.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint
from vfl.party.state.store import StateDir

__all__ = ["Checkpoint", "StateDir", "decode_checkpoint", "encode_checkpoint"]
