"""The job spec's `features:` section: how each party bins its own columns to measure
their weight of evidence (WOE) and information value (IV) against the label, and which
columns a training job keeps (`select`).

```yaml
features:
  bins: 10                 # per column, fitted on the rows analysed at its own party
  binning: quantile        # or monotone: quantile bins merged until the event rate is
                           # monotone (numeric columns)
  select: {iv_min: 0.02, top: 15}   # training: each party keeps its columns with IV >=
                                    # 0.02, at most its 15 best
```
`vfl analyze job.yaml` runs the analysis alone (`JobSpec.analyze`, set by the command);
a training job with `select` runs it on its training rows first, and each party drops
its own columns below the bar before its model is built (docs/usage.md, "Analysis: WOE
and IV").
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator
from vfl.contract.spec.fields import NUMBER, FieldProblem, SpecModel

MAX_WOE_BINS = 255  # a bin code fits a byte, as a tree's


class SelectSpec(SpecModel):
    """Which columns a training job keeps, each party its own, by their IV."""

    iv_min: Annotated[float, Field(ge=0, le=100, strict=True), NUMBER] | None = Field(
        None, description="drop a column whose IV is below this (0.02: 'useless' below it)"
    )
    top: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        strict=True,
        description="keep at most this many columns per party",
    )

    @model_validator(mode="after")
    def _something(self) -> SelectSpec:
        if self.iv_min is None and self.top is None:
            raise FieldProblem("iv_min", "or top must be given (e.g. select: {iv_min: 0.02})")
        return self


class FeaturesSpec(SpecModel):
    """WOE bins per column and the IV-based choice of columns."""

    bins: int = Field(
        10,
        ge=2,
        le=MAX_WOE_BINS,
        strict=True,
        description="bins per numeric column (quantiles); a categorical column keeps its "
        "bins - 1 most frequent words seen twice or more, and every other word shares one "
        "bin; an empty cell is a bin of its own besides these",
    )
    binning: Literal["quantile", "monotone"] = Field(
        "quantile",
        description="quantile, or monotone: quantile bins merged with their neighbours "
        "until the event rate rises or falls monotonically (numeric columns)",
    )
    select: SelectSpec | None = Field(
        None, description="training: keep each party's columns by IV, e.g. {iv_min: 0.02}"
    )


def check_analysis(analyze: bool, features: FeaturesSpec, task: str, predict: bool) -> None:
    """What an analysis (`analyze`, `features.select`) takes of the rest of the spec: a
    binary task, and no prediction."""
    if (analyze or features.select is not None) and task != "binary":
        raise FieldProblem(
            "analyze" if analyze else "features",
            f"WOE and IV measure a binary label; this job's task is {task}",
        )
    if analyze and predict:
        raise FieldProblem("analyze", "cannot go with predict: a job analyses or scores")
