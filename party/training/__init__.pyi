# The public names of `vfl.party.training`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .context import RoleContext as RoleContext
from .plan import Plan as Plan
from .plan import make_plan as make_plan
from .task import Task as Task
from .task import make_task as make_task
from .trainers import Trainer as Trainer
