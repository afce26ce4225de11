"""The coordinator daemon: the job store, the job life cycle, the models' registry and the
dashboard. It never holds data, keys, activations or derivatives.

    CoordinatorClient, JobView    the typed gRPC client (`client`: what the CLI, the
                                  Python API and party daemons use)
    create_coordinator_server, CoordinatorServer   the running daemon (`server`)
    Lifecycle, JobStore           submit, launch, fold in reports; the SQLite job store
    diagnose                      `vfl doctor`'s checks (`doctor`)
    CoordinatorError and its subclasses   what the coordinator raises (`errors`)

Every name loads on first use (`__init__.pyi` lists them), so a party daemon that imports
`vfl.coordinator.client` does not load the coordinator daemon.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
