"""One rollout session, shared by `looprl rl`, `looprl eval` and `looprl validate`.

A `RolloutSession` owns what every command that rolls out an environment needs: the env servers
of the splits it uses, the gateway in front of the model, the run store writer with the run's row,
and reward aggregation with the run's `reward_weights`. What each command does with the groups
(advantages and training batches for `rl`, a summary for `eval`, contract checks for `validate`)
stays with the command.
"""

from looprl.session.rollouts import Group, RolloutSession

__all__ = ["Group", "RolloutSession"]
