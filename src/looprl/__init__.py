"""looprl: reinforcement learning for language models on environments written in plain Python."""
