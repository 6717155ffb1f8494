from enum import StrEnum


class OnExpiryType0Action(StrEnum):
    FAIL = "fail"

    def __str__(self) -> str:
        return str(self.value)
