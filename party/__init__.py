"""The party daemon: next to one organisation's data, it serves its datasets to jobs,
runs its training role, keeps its model parts and scores with them.

    PartyConfig, load_party_config    its config file (`vfl party serve --config`)
    Limits                            what a job may hold here (the config's `limits:`)
    create_party_server, PartyServer  the running daemon (gRPC server, registration)
    DaemonOptions, PartyDaemon        the daemon's logic: prepare, start and end jobs, over its
                                      job registry, data-plane endpoint and compute
    PartyError and its subclasses     what the party raises (`party.errors`)

Sub-packages: `tables` (reading and preparing its tables), `training` (the roles),
`inference` (batch and online scoring), `state` (checkpoints and model parts on disk),
`transport` (the gRPC data plane, wire audit).
The names load on first use (`__init__.pyi` lists them), so importing one module of the
party, e.g. its config, does not start loading the whole daemon.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
