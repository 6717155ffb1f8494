from enum import StrEnum


class OnExpiryDecideAction(StrEnum):
    DECIDE = "decide"

    def __str__(self) -> str:
        return str(self.value)
