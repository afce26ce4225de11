# The public names of `vfl`: for type checkers, and for `lazy_loader`,
# which loads each from its module on first use (`__init__.py`).

from .client import Client as Client
from .contract.spec import JobSpec as JobSpec
from .contract.spec import load_spec as load_spec
from .contract.spec import parse_spec as parse_spec
from .errors import (
    AccessDenied as AccessDenied,
)
from .errors import (
    CertError as CertError,
)
from .errors import (
    CoordinatorError as CoordinatorError,
)
from .errors import (
    CoordinatorLost as CoordinatorLost,
)
from .errors import (
    CoordinatorUnavailable as CoordinatorUnavailable,
)
from .errors import (
    PartyUnavailable as PartyUnavailable,
)
from .errors import (
    SpecError as SpecError,
)
from .errors import (
    UnknownJob as UnknownJob,
)
from .errors import (
    UnknownModel as UnknownModel,
)
from .local import LocalFederation as LocalFederation
from .local import local_federation as local_federation
from .models import Model as Model
from .models import ModelPart as ModelPart
from .results import (
    Job as Job,
)
from .results import (
    JobResult as JobResult,
)
from .results import (
    Prediction as Prediction,
)
from .results import (
    Progress as Progress,
)
from .results import (
    Validation as Validation,
)
from .scoring import Score as Score
from .scoring import Scores as Scores
