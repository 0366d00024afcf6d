"""looprl.utils."""
