"""CELU-VFL local updates: workset table, uniform sampling, instance weighting.

    LocalUpdateConfig   a job's `local_updates:` section (`config`)
    LocalUpdater        the local-update loop between communication rounds (`local_loop`)
    WorksetTable, CachedBatch   recently exchanged statistics, by batch (`workset`)
    UniformSampler      uniform sampling from the workset (`sampling`)
    instance_weights    CELU-VFL's instance weighting (`weighting`)
    CeluError and its subclasses (`errors`)

Nothing in this package imports grpc, `party` or `coordinator`. The names load on first
use (`__init__.pyi` lists them): the job spec reads `config` without loading torch.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
