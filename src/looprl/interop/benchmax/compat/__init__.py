"""looprl's stand-in for the `benchmax` package, served under that name only when benchmax is absent.

It mirrors benchmax 0.2's public env API (`benchmax.envs`, `.envs.base`, `.envs.shared_types`,
`.envs.dataset`, `.envs.logging`, `.envs.identity`) on top of `looprl.envs`, so an env file written
against benchmax runs unchanged on Python 3.11. `compat.envs.base.BaseEnv` takes benchmax's
constructor and hook defaults, and the runner registered for it (`looprl.interop.benchmax.runner`)
scores by benchmax's rules where they differ from looprl's (`compute_reward` may return None, strict
group rewards); docs/environments.md ("benchmax envs") lists what the layer lacks.
"""
