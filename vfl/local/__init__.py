"""A whole federation on this machine: a coordinator and every party as local processes,
with a fresh federation CA and mutual TLS. `vfl run`, `vfl demo`, the benchmarks and the
tests start theirs here; a notebook user gets one with `vfl.local_federation`.

    topology.py     starting and stopping the processes (ports, logs, parent watch)
    run.py          a run: its folder and CA, the admin client, `run_local`, `started`
    federation.py   `local_federation`: a run with a connected `vfl.Client`
"""

from vfl.local.federation import LocalFederation, local_federation
from vfl.local.run import LocalRun, run_local, spec_to_yaml, started
from vfl.local.topology import LocalTopology

__all__ = [
    "LocalFederation",
    "LocalRun",
    "LocalTopology",
    "local_federation",
    "run_local",
    "spec_to_yaml",
    "started",
]
