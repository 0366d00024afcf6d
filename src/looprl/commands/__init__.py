"""The user commands that are not one process's own: they run an environment or read a run store on
the user's machine.

`looprl eval` and `looprl validate` are thin layers over `looprl.session.RolloutSession` (env
servers, gateway, store, reward totals): each checks its flags, the output directory and the env's
first rows before it starts an inference engine, then reports as rollouts finish. `looprl rescore`
and `looprl replay` re-run an env's reward hooks or one rollout from what a run store recorded.

One package per command with more than one module (`eval/`, `validate/`, `rescore/`, `replay/`, each
with its `command` module holding `add_arguments` and `run`); `rollouts`, `logs` and `metrics` are one
module each. Shared: `endpoint` (the model endpoint of `eval` and `validate`) and `stored` (what
`rescore` and `replay` rebuild from a run store).
"""
