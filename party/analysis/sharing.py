"""Who learns what of an analysis, as each party's config sets it (`analysis:` in the
party config; docs/security.md, "WOE and IV").

```yaml
analysis:
  share_names: false    # a passive party: its column names go to the active party (and
                        # the result); else they are x0, x1, ... (their positions)
  report_bins: false    # a passive party: its bin edges and categories go into the job's
                        # result (to the coordinator, never to a peer)
  show_passive: false   # the active party: each passive party receives its own columns'
                        # counts per bin (so their WOE and IV: label statistics per bin)
```
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AnalysisSharing(BaseModel):
    """A party's settings of what its analyses reveal, and to whom."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    share_names: bool = Field(
        False, description="passive: send its column names to the active party and the result"
    )
    report_bins: bool = Field(
        False, description="passive: report its bin edges and categories in the job's result"
    )
    show_passive: bool = Field(
        False, description="active: give each passive party its own columns' counts per bin"
    )
