"""The base of every config model: an unknown key is an error, so a typo never passes silently.

A field's docstring (the string under it) is its description: `scripts/gen_reference.py` writes them into
the docs' config reference, and a field without one fails that script and its staleness test."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
