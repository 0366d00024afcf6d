"""Adapters that run environments written for other frameworks (benchmax, verifiers) on looprl's runtime.

The env-side runtime (`looprl.envserver.loading`) reaches for them when a spec names such an env; the
user contract (`looprl.envs`) never imports them.
"""
