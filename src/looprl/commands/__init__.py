"""The user commands that roll out an environment outside of training: `looprl eval` and `looprl validate`.

Each is a thin layer over `looprl.session.RolloutSession` (env servers, gateway, store, reward
totals): it checks its flags, the output directory and the env's first rows before it starts an
inference engine, then reports as rollouts finish.
"""
