from enum import StrEnum


class OnExpiryType1Action(StrEnum):
    CANCEL = "cancel"

    def __str__(self) -> str:
        return str(self.value)
