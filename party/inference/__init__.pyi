# The public names of `vfl.party.inference`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .batch import PredictJob as PredictJob
from .batcher import MicroBatcher as MicroBatcher
from .model import LoadedModel as LoadedModel
from .online import OnlineScoring as OnlineScoring
from .serving import IdResult as IdResult
from .serving import Prediction as Prediction
from .serving import ServedModel as ServedModel
from .session import ActiveSession as ActiveSession
from .session import PassiveSession as PassiveSession
from .session import Rows as Rows
