"""The contract both daemons and the `vfl` command share, owned by neither: the job spec
(`spec/`), the job and model states (`states.py`), log lines that name their job
(`logs.py`), the shared errors (`errors.py`) and a job's curves from its report
(`curves.py`: what `vfl report` plots and the dashboard draws). The wire messages themselves are in
`vfl.proto`. `vfl.party` and `vfl.coordinator` import this package; it imports neither.

    JobSpec, PartySpec, DataSpec, TableSource   the job spec and its parts
    load_spec, parse_spec, parse_spec_text      read one (a YAML file, a mapping, text)
    job_schema                                  its JSON Schema (`vfl spec schema`)
    PredictSpec, parse_predict_text             a batch prediction's spec
    JobState, TERMINAL, RUNNING, state_name, state_from_name, model_state_name   states
    ContractError, SpecError                    the shared errors (SpecError names the field)
    job_context, configure_daemon_logging       log lines that name their job
"""

from vfl.contract.errors import ContractError, SpecError
from vfl.contract.logs import configure_daemon_logging, job_context
from vfl.contract.spec import (
    DataSpec,
    JobSpec,
    PartySpec,
    TableSource,
    job_schema,
    load_spec,
    parse_spec,
    parse_spec_text,
)
from vfl.contract.spec.predict import PredictSpec, parse_predict_text
from vfl.contract.states import (
    RUNNING,
    TERMINAL,
    JobState,
    ModelState,
    model_state_name,
    state_from_name,
    state_name,
)

__all__ = [
    "RUNNING",
    "TERMINAL",
    "ContractError",
    "DataSpec",
    "JobSpec",
    "JobState",
    "ModelState",
    "PartySpec",
    "PredictSpec",
    "SpecError",
    "TableSource",
    "configure_daemon_logging",
    "job_context",
    "job_schema",
    "load_spec",
    "model_state_name",
    "parse_predict_text",
    "parse_spec",
    "parse_spec_text",
    "state_from_name",
    "state_name",
]
