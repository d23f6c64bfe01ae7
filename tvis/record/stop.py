"""The signal tvis raises into a training script once enough steps are recorded."""


class StopRecording(BaseException):
    """Raised into the script once enough steps are recorded (not an ``Exception``, so
    ordinary ``except Exception`` blocks let it through)."""
