from enum import StrEnum


class OnExpiryFailAction(StrEnum):
    FAIL = "fail"

    def __str__(self) -> str:
        return str(self.value)
