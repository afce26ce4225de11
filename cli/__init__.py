"""`vfl`, the command line (`main`), a thin shell over the Python API (`vfl.Client`,
`vfl.specs`, `vfl.scoring`, `vfl.watching`, `vfl.daemons`) and the daemons' entry points;
it never imports the coordinator (`tests/test_layering.py` holds it to that).

    build_parser   the command's arguments (`main`; the entry point is `vfl.cli.main:main`)

Each command is a module with `add_parser` (`jobs`, `models`, `predict`, `score`,
`certs`, `run`, `demo`, ...); `vfl run` and `vfl demo` start their federation with
`vfl.local`. The names load on first use
(`__init__.pyi` lists them): `python -m vfl.cli.main` and the daemons' worker processes
load nothing else."""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
