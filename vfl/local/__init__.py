"""A whole federation on this machine: a coordinator and every party as local processes,
with a fresh federation CA and mutual TLS. `vfl run`, `vfl demo`, the benchmarks and the
tests start theirs here (the tests' and the soak's daemons one by one, to kill and
restart them); a notebook user gets one with `vfl.local_federation`.

    daemon.py       one `vfl ... serve` process: start, stop, kill -9, start again
    topology.py     the coordinator and the parties as daemons (start, stop, restart one)
    run.py          a run: its folder and CA, the admin client, `run_local`, `started`
    federation.py   `local_federation`: a run with a connected `vfl.Client`
"""

from vfl.local.daemon import Daemon
from vfl.local.federation import LocalFederation, local_federation
from vfl.local.run import LocalRun, run_local, spec_to_yaml, started
from vfl.local.topology import LocalTopology

__all__ = [
    "Daemon",
    "LocalFederation",
    "LocalRun",
    "LocalTopology",
    "local_federation",
    "run_local",
    "spec_to_yaml",
    "started",
]
