from enum import StrEnum


class NetworkMode(StrEnum):
    HOST = "host"
    NONE = "none"

    def __str__(self) -> str:
        return str(self.value)
