from enum import StrEnum


class Role(StrEnum):
    ADMIN = "admin"
    FRONTEND = "frontend"
    METRICS = "metrics"
    RUNTIME = "runtime"

    def __str__(self) -> str:
        return str(self.value)
