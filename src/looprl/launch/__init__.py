"""looprl.launch."""
