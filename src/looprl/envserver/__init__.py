"""looprl.envserver."""
