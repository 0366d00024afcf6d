"""The tiny random-weight model of the inference tests, for the engine's security tests."""

from tests.unit.inference.conftest import tiny_model_dir  # noqa: F401 (a fixture)
