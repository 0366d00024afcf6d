"""`RolloutFailure`: how a hook ends its own rollout with a reason of its choosing."""


class RolloutFailure(Exception):
    """Raise from any env hook to end this rollout with `termination_reason = reason`.

    The rollout keeps its transcript and log records, gets no reward components, and its siblings
    carry on untouched. Use it for operational problems you can name (`"sandbox_unavailable"`).
    """

    def __init__(self, reason: str, message: str = "") -> None:
        super().__init__(message or reason)
        self.reason = reason
        self.message = message or reason
