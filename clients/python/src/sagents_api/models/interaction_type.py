from enum import StrEnum


class InteractionType(StrEnum):
    APPROVAL = "approval"
    CREDENTIAL = "credential"
    ELICITATION = "elicitation"
    PERMISSION = "permission"
    USER_INPUT = "user_input"

    def __str__(self) -> str:
        return str(self.value)
