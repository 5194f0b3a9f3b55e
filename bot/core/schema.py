"""The one base for config files and job specs: an unknown key is a typo, refused at load."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that rejects keys it does not declare."""

    model_config = ConfigDict(extra="forbid")
