"""The base of every config model: an unknown key is an error, so a typo never passes silently."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
