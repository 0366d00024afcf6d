"""benchmax's log-attribution helpers: looprl's, which its capture handler reads."""

from looprl.envs.logging import group_context, rollout_context

__all__ = ["group_context", "rollout_context"]
