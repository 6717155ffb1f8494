from enum import StrEnum


class OnExpiryType2Action(StrEnum):
    DECIDE = "decide"

    def __str__(self) -> str:
        return str(self.value)
