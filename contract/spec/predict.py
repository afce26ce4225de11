"""A batch prediction: which stored model scores which dataset of each party.

`vfl predict M --data bank=applicants --data shop=shop_2026 [--out NAME]`, or the same as
YAML (`vfl predict --spec predict.yaml`):

```yaml
model: j-1a2b3c4d        # a model the federation holds (`vfl models`), by its job id
data: {bank: applicants, shop: shop_2026}   # each party's dataset, from its own config
out: applicants-2026     # optional: the CSV's name in the active party's output folder
```
The coordinator turns it into a job (`JobSpec` of the model's training job with these
datasets and this section as `predict:`), so it runs, pauses and is watched as any job.
"""

from __future__ import annotations

from pydantic import Field
from vfl.contract.spec.fields import Name, SpecModel
from vfl.contract.spec.messages import parse_yaml, validated


class PredictSpec(SpecModel):
    """A batch prediction with a stored model."""

    model: Name = Field(description="the model's id (its training job's id), see `vfl models`")
    data: dict[Name, Name] = Field(
        description="each party's dataset, by party id: {bank: applicants, shop: shop_2026}"
    )
    out: Name | None = Field(
        None, description="the CSV's name in the active party's output folder (default: job id)"
    )
    batch_size: int = Field(
        2048, ge=1, le=1 << 20, strict=True, description="rows scored per exchange"
    )


def parse_predict_text(text: str) -> PredictSpec:
    """Raises:
    SpecError: the text is not YAML or not a valid prediction (names the field)."""
    raw = parse_yaml(text, "prediction spec")
    return validated(raw, PredictSpec, "a prediction spec is a mapping with 'model' and 'data'")
