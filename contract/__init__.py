"""The contract both daemons and the `vfl` command share, owned by neither: the job spec
(`spec/`), the job and model states (`states.py`), log lines that name their job
(`logs.py`) and the shared errors (`errors.py`). The wire messages themselves are in
`vfl.proto`. `vfl.party` and `vfl.coordinator` import this package; it imports neither.
"""

from vfl.contract.errors import ContractError, SpecError
from vfl.contract.spec import JobSpec, PartySpec, TableSource, load_spec, parse_spec
from vfl.contract.states import TERMINAL, JobState, state_name

__all__ = [
    "TERMINAL",
    "ContractError",
    "JobSpec",
    "JobState",
    "PartySpec",
    "SpecError",
    "TableSource",
    "load_spec",
    "parse_spec",
    "state_name",
]
