from enum import StrEnum


class SuspensionReason(StrEnum):
    APPROVAL_REQUIRED = "approval_required"
    EXTERNAL_EVENT = "external_event"
    INPUT_REQUIRED = "input_required"
    MANUAL_PAUSE = "manual_pause"
    PERMISSION_REQUIRED = "permission_required"
    POLICY_HOLD = "policy_hold"
    RESOURCE_WAIT = "resource_wait"

    def __str__(self) -> str:
        return str(self.value)
