# The public names of `vfl.cli`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .main import build_parser as build_parser
