from enum import StrEnum


class ClaimKind(StrEnum):
    RESUME = "resume"
    START = "start"

    def __str__(self) -> str:
        return str(self.value)
