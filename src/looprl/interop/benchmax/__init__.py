"""benchmax environments on looprl: the real package through an adapter, or a compatibility layer.

With benchmax installed (it needs Python 3.12), `adapter.BenchmaxEnvironment` drives the user's
class with benchmax's own `run_group`, so rollouts end and score exactly as benchmax says. Without it
(Python 3.11, where `pip install benchmax` silently picks an unrelated 0.1 release), `finder` serves
`benchmax.envs...` imports from `compat`, benchmax's public names mapped onto `looprl.envs`, and
`runner` scores its envs by benchmax's rules.
"""
