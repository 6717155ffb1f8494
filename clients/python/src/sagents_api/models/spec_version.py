from enum import StrEnum


class SpecVersion(StrEnum):
    SAGENTS_SANDBOX_SPECV3 = "sagents.sandbox-spec/v3"

    def __str__(self) -> str:
        return str(self.value)
