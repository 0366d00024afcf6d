"""Contract checks behind `looprl validate`: what an environment gets wrong, as plain sentences."""

from __future__ import annotations

import re
from typing import Any

from looprl.envs.types import FAILURE_REASONS, RolloutResult

_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def tool_problems(tools: Any) -> list[str]:
    """OpenAI function-tool schema problems in what `list_tools` returned."""
    if not isinstance(tools, list):
        return [f"list_tools must return a list, got {type(tools).__name__}"]
    problems = []
    names = set()
    for i, tool in enumerate(tools):
        where = f"list_tools()[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            problems.append(f"{where} must be {{'type': 'function', 'function': {{...}}}}")
            continue
        fn = tool["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            problems.append(f"{where}.function.name must match [a-zA-Z0-9_-]{{1,64}}, got {name!r}")
        elif name in names:
            problems.append(f"{where}: duplicate tool name {name!r}")
        names.add(name)
        params = fn.get("parameters", {"type": "object"})
        if not isinstance(params, dict) or params.get("type") != "object":
            problems.append(f"{where}.function.parameters must be a JSON schema with \"type\": \"object\"")
        elif not isinstance(params.get("properties", {}), dict):
            problems.append(f"{where}.function.parameters.properties must be an object")
    return problems


def result_problems(results: list[RolloutResult]) -> list[str]:
    """Failures in a validation group that point at the environment (not at the model)."""
    problems = []
    for r in results:
        if r.scored:
            continue
        first_line = (r.error or "").strip().splitlines()[0] if r.error else ""
        if r.termination_reason == "model_error":
            problems.append(f"rollout {r.rollout_id}: the model call failed ({first_line}); is the model server up?")
        elif r.termination_reason in FAILURE_REASONS or r.termination_reason:
            problems.append(f"rollout {r.rollout_id} ended as {r.termination_reason}: {first_line}")
    return problems
