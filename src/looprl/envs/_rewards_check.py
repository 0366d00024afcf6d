"""Validation of reward dictionaries returned by `compute_reward` / `compute_group_rewards`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Real
from typing import Any


class InvalidReward(ValueError):
    """A reward hook returned something other than a dict of finite numbers."""


def check_reward_dict(value: Any, hook: str) -> dict[str, float]:
    """Return `value` as `{component: float}`, or raise `InvalidReward` saying what was wrong."""
    if not isinstance(value, Mapping):
        raise InvalidReward(f"{hook} must return a dict of component -> number, got {type(value).__name__}")
    out: dict[str, float] = {}
    for key, v in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidReward(f"{hook} returned a component name {key!r}; names must be non-empty strings")
        if not isinstance(v, Real):
            raise InvalidReward(f"{hook} returned {key}={v!r} ({type(v).__name__}); components must be numbers")
        number = float(v)
        if not math.isfinite(number):
            raise InvalidReward(f"{hook} returned {key}={number}; components must be finite")
        out[key] = number
    return out
