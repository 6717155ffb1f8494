from enum import StrEnum


class ExpiryAction(StrEnum):
    CANCEL = "cancel"
    DECIDE = "decide"
    FAIL = "fail"

    def __str__(self) -> str:
        return str(self.value)
