"""looprl.envs."""
