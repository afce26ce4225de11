# The public names of `vfl`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .analysis import Analysis as Analysis, ColumnIV as ColumnIV
from .client import Client as Client
from .contract.spec import JobSpec as JobSpec, load_spec as load_spec, parse_spec as parse_spec
from .errors import (
    AccessDenied as AccessDenied,
    CertError as CertError,
    CoordinatorError as CoordinatorError,
    CoordinatorLost as CoordinatorLost,
    CoordinatorUnavailable as CoordinatorUnavailable,
    PartyUnavailable as PartyUnavailable,
    ScoringBusy as ScoringBusy,
    SpecError as SpecError,
    UnknownJob as UnknownJob,
    UnknownModel as UnknownModel,
)
from .local import LocalFederation as LocalFederation, local_federation as local_federation
from .models import Model as Model, ModelPart as ModelPart
from .results import (
    Job as Job,
    JobResult as JobResult,
    JobView as JobView,
    Prediction as Prediction,
    Progress as Progress,
    Validation as Validation,
)
from .scoring import Score as Score, Scores as Scores
