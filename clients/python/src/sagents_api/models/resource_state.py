from enum import StrEnum


class ResourceState(StrEnum):
    ACTIVE = "active"
    NEEDS_ATTENTION = "needs_attention"
    PROVISIONING = "provisioning"
    RELEASED = "released"
    RELEASE_BLOCKED = "release_blocked"
    RELEASE_FAILED = "release_failed"
    RELEASE_REQUESTED = "release_requested"
    RESTORE_REQUESTED = "restore_requested"

    def __str__(self) -> str:
        return str(self.value)
