from enum import StrEnum


class ExecutionAffinity(StrEnum):
    EXTERNAL = "external"
    SANDBOX = "sandbox"

    def __str__(self) -> str:
        return str(self.value)
