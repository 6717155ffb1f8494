from enum import StrEnum


class OnExpiryCancelAction(StrEnum):
    CANCEL = "cancel"

    def __str__(self) -> str:
        return str(self.value)
