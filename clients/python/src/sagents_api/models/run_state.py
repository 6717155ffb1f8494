from enum import StrEnum


class RunState(StrEnum):
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"
    QUEUED = "queued"
    RESUMING = "resuming"
    RUNNING = "running"
    SUSPENDED = "suspended"
    SUSPEND_REQUESTED = "suspend_requested"

    def __str__(self) -> str:
        return str(self.value)
