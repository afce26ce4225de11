"""A party's state directory: its checkpoints (and key material) per job, and its model
parts, on its own disk.

<state_dir>/jobs/<job_id>/round-000120.ckpt    newest two kept, written atomically

    StateDir                   the folder and its atomic writes (`store`)
    Checkpoint, encode_checkpoint, decode_checkpoint   one checkpoint file (`checkpoint_file`)
    JobCheckpoints             a job's checkpoints, when to write and which to resume
    ModelStore, Manifest       stored model parts and what each holds (`model_store`)
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
