# The public names of `vfl.party.inference`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .batch import PredictJob as PredictJob
from .batcher import MicroBatcher as MicroBatcher
from .model import LoadedModel as LoadedModel
from .online import OnlineScoring as OnlineScoring
from .rows import Rows as Rows, RowSource as RowSource
from .serving import IdResult as IdResult, Prediction as Prediction, ServedModel as ServedModel
from .session import ActiveSession as ActiveSession, PassiveSession as PassiveSession
