from enum import StrEnum


class PauseBehavior(StrEnum):
    CANCEL = "cancel"
    CONTINUE = "continue"
    DETACH = "detach"

    def __str__(self) -> str:
        return str(self.value)
