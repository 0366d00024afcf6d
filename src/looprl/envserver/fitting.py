"""A group's results made sendable in one `GroupDone`: a bad result fails its own rollout, not the group.

A worker answers each group with one protocol line (`looprl.envserver.lines`). When that line cannot be
sent, `fit_results` fails each result that cannot be sent, and only those:

- a result holding a value JSON cannot carry (an object in a message) ends as `env_error`;
- while the line would be longer than `env.max_message_bytes`, the largest result ends as
  `message_too_large` (with its size, the limit and the key to raise), keeping only its prompt.

Each such rollout gets a `failure_record` saying why (`failures` pairs it with its rollout id); its
siblings keep their results.
"""

from __future__ import annotations

from looprl.envs.types import GroupRequest, LogRecordData, RolloutResult
from looprl.envserver.capture import failure_record
from looprl.envserver.lines import MESSAGE_TOO_LARGE, UNSENDABLE, too_large_error
from looprl.envserver.protocol import GroupDone, encode


def _failed(result: RolloutResult, request: GroupRequest, reason: str, error: str) -> RolloutResult:
    return result.model_copy(update={"messages": list(request.example.prompt_messages), "termination_reason": reason,
                                     "error": error, "rewards": {}, "logs": []})


def fit_results(message_id: str, request: GroupRequest, results: list[RolloutResult],
                limit: int) -> tuple[list[RolloutResult], list[tuple[str, LogRecordData]]]:
    """`results` with those that cannot be sent in one `GroupDone` of at most `limit` bytes failed, and the
    failure record of each rollout failed here (the line may still be too long when even the prompts are)."""
    out, sizes, failures = list(results), [0] * len(results), []
    for i, result in enumerate(out):
        try:
            sizes[i] = len(encode(result))
        except UNSENDABLE as e:
            out[i] = _failed(result, request, "env_error", f"the rollout's result cannot be sent to the env server: "
                                                           f"{type(e).__name__}: {e}")
            sizes[i] = len(encode(out[i]))
            failures.append(i)
    overhead = len(encode(GroupDone(id=message_id, results=[]))) + len(out)
    shrinkable = {i for i in range(len(out)) if i not in failures}
    while shrinkable and overhead + sum(sizes) > limit:
        i = max(shrinkable, key=sizes.__getitem__)
        shrinkable.discard(i)
        error = too_large_error(f"the rollout's result ({sizes[i]:,} bytes, the largest of its group's "
                                f"{overhead + sum(sizes):,})", limit)
        out[i] = _failed(out[i], request, MESSAGE_TOO_LARGE, error)
        sizes[i] = len(encode(out[i]))
        failures.append(i)
    return out, [(out[i].rollout_id, failure_record(out[i].termination_reason, out[i].error)) for i in failures]
