# The code sample of seeds/001 (the BaseEnv interface), verbatim but for the import root.
from contextlib import asynccontextmanager
from pathlib import Path

from looprl.envs import BaseEnv, BaseRollout, DatasetSplit, JsonlDataset, Tool
from looprl.rewards import extract_completion_text


class MyEnv(BaseEnv):
    max_turns = 1  # bounds the chat loop; max_tool_calls separately bounds tool usage

    async def create_dataset(
        self, split: DatasetSplit, base_dir: Path, *, max_examples: int | None = None
    ) -> JsonlDataset:
        """required. map a split ("train" or "eval") to a finite dataset. every
        example payload contains `prompt_messages`; other fields are opaque data
        your reward can read later. `max_examples` lets validation and capped
        runs load a small slice."""
        return JsonlDataset(
            base_dir / f"{split}.jsonl", row_to_example=..., max_examples=max_examples
        )

    # implement at least one of the two scoring hooks; when both are present
    # the trainer merges their reward dicts.

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        """score one completed rollout."""
        answer = extract_completion_text(rollout.messages)
        return {"correct": float(answer == rollout.example_args["answer"])}

    async def compute_group_rewards(self, rollouts):
        """score a completed sibling group jointly (win-rate, ranking,
        diversity)."""
        ...

    # every hook below is optional; the defaults give a tool-less loop.

    async def list_tools(self) -> list[Tool]:
        """declare OpenAI-compatible tools the model may call. defaults to []."""
        return [...]

    async def run_tool(self, rollout_id: str, tool_name: str, **tool_args):
        """execute one tool call; the return value is the tool result the
        model sees."""
        ...

    @asynccontextmanager
    async def rollout_context(self, rollout_id, example):
        """acquire per-rollout resources before the model sees the prompt and
        release them afterwards (workspace files, db seed, a sandbox)."""
        yield

    async def aclose(self):
        """close environment-owned shared resources when the environment is
        done."""
