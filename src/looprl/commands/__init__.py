"""The user commands that are not one process's own: they run an environment or read a run store on
the user's machine.

`looprl eval` and `looprl validate` are thin layers over `looprl.session.RolloutSession` (env
servers, gateway, store, reward totals): each checks its flags, the output directory and the env's
first rows before it starts an inference engine, then reports as rollouts finish. `looprl rescore`
and `looprl replay` re-run an env's reward hooks or one rollout from what a run store recorded.
"""
