"""looprl.inspector."""
