"""looprl's stand-in for the `benchmax` package, served under that name only when benchmax is absent.

It mirrors benchmax 0.2's public env API (`benchmax.envs`, `.envs.base`, `.envs.shared_types`,
`.envs.dataset`, `.envs.logging`, `.envs.identity`) on top of `looprl.envs`, so an env file written
against benchmax runs unchanged on Python 3.11. `compat.envs.base.BaseEnv` carries benchmax's
semantics where they differ from looprl's own `BaseEnv` (limits in the constructor, `compute_reward`
may return None, strict group rewards); the README's "Bring your environment" lists what it lacks.
"""
