"""`looprl eval`: the command (`command`), its rollout run on a `RolloutSession` (`run`), live progress and the
end-of-run summary."""
