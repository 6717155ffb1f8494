from enum import StrEnum


class ListInboxStatus(StrEnum):
    PENDING = "pending"

    def __str__(self) -> str:
        return str(self.value)
