"""looprl.store."""
