from enum import StrEnum


class JobState(StrEnum):
    COMPLETED = "completed"
    CREATED = "created"
    FAILED = "failed"
    KILLED = "killed"
    ORPHANED = "orphaned"
    RUNNING = "running"

    def __str__(self) -> str:
        return str(self.value)
