"""The base of every config model: an unknown key is an error, so a typo never passes silently.

A field's docstring (the string under it) is its description: `scripts/gen_reference.py` writes them into
the docs' config reference, and a field without one fails that script and its staleness test.

A config is written to `config.toml`, the run store and the trackers, so it holds no secret: a field
that must is a `SecretStr` (which dumps as `**********`), and a URL field is a `Url`, which refuses a
password written into it (`https://user:PASSWORD@host`)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def _without_password(url: str) -> str:
    if urlsplit(url).password is not None:
        raise ValueError("holds a password, which would be written to config.toml, the run store and the "
                         "trackers; give it to the service through its environment variables instead")
    return url


Url = Annotated[str, AfterValidator(_without_password)]
"""A URL that carries no password."""
