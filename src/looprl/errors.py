"""User-facing errors.

A `UserError` is a problem with what the user gave us (a missing file, a bad `path:Class`, invalid
JSON, a bad config key). The `looprl` command prints its message on one line and exits 2, with no
traceback: the message itself must say what was wrong and where (file and line, config key).
"""


class UserError(Exception):
    """Bad input from the user; `looprl` prints the message and exits with status 2."""
