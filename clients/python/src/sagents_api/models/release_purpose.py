from enum import StrEnum


class ReleasePurpose(StrEnum):
    FORCED_TERMINATE = "forced_terminate"
    RECONCILE = "reconcile"
    RUN_ENDED = "run_ended"
    SUSPEND = "suspend"

    def __str__(self) -> str:
        return str(self.value)
