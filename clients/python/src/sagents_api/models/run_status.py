from enum import StrEnum


class RunStatus(StrEnum):
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"
    QUEUED = "queued"
    RESUMING = "resuming"
    RUNNING = "running"
    WAITING_FOR_INPUT = "waiting_for_input"

    def __str__(self) -> str:
        return str(self.value)
