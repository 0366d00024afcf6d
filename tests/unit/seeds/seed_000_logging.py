# The code samples of seeds/000 (environment logging), verbatim but for the import root.
import logging

from looprl.envs import BaseEnv, BaseRollout

logger = logging.getLogger(__name__)

class MyEnv(BaseEnv):
    async def run_tool(self, rollout_id, tool_name, **tool_args):
        logger.info(f"calling {tool_name} with {tool_args}")
        result = await self._dispatch(tool_name, **tool_args)
        logger.info(f"result: {str(result)[:200]}")
        return result

    async def compute_reward(self, rollout: BaseRollout) -> dict[str, float]:
        text = self._extract_answer(rollout.messages)
        score = await self._judge(text, rollout.example_args["ground_truth"])
        logger.info(f"score: {score}, answer: {text[:200]}")
        return {"correctness": score}

from looprl.envs.logging import rollout_context


async def compute_group_rewards(self, rollouts):
    logger.info("scoring group")  # attributed to all rollouts

    results = {}
    for r in rollouts:
        with rollout_context(r.rollout_id):
            logger.info("scoring individual rollout")  # attributed to this rollout only
            results[r.rollout_id] = {"quality": self._score(r.messages)}
    return results
