"""verifiers environments (the classic API of verifiers 0.3: `load_environment(**kwargs)`) on looprl."""
