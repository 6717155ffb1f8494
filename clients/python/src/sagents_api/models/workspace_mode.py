from enum import StrEnum


class WorkspaceMode(StrEnum):
    ACTIVE_WORKSPACE = "active_workspace"
    ISOLATED = "isolated"

    def __str__(self) -> str:
        return str(self.value)
