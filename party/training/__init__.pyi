# The public names of `vfl.party.training`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .context import RoleContext as RoleContext
from .plan import Plan as Plan, make_plan as make_plan
from .task import Task as Task, make_task as make_task
