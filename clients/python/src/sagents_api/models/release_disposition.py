from enum import StrEnum


class ReleaseDisposition(StrEnum):
    DETACH = "detach"
    SNAPSHOT_AND_TERMINATE = "snapshot_and_terminate"
    TERMINATE = "terminate"

    def __str__(self) -> str:
        return str(self.value)
