from enum import StrEnum


class InteractionStatus(StrEnum):
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    PENDING = "pending"
    RESOLVED = "resolved"

    def __str__(self) -> str:
        return str(self.value)
