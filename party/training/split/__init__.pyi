# The public names of `vfl.party.training.split`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .active import ActiveTrainer as ActiveTrainer
from .passive import PassiveTrainer as PassiveTrainer
