"""looprl.gateway."""
