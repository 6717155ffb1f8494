from enum import StrEnum


class AttentionAction(StrEnum):
    GIVE_UP = "give_up"
    MARK_RELEASED = "mark_released"
    RETRY_NOW = "retry_now"

    def __str__(self) -> str:
        return str(self.value)
