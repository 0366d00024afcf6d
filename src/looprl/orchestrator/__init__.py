"""looprl.orchestrator."""
