from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..models.attention_action import AttentionAction

T = TypeVar("T", bound="ResolveAttention")


@_attrs_define
class ResolveAttention:
    """
    Attributes:
        action (AttentionAction):
        reason (str): Why, for the record's history (1 to 500 characters, not only whitespace).
    """

    action: AttentionAction
    reason: str

    def to_dict(self) -> dict[str, Any]:
        action = self.action.value

        reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "action": action,
                "reason": reason,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        action = AttentionAction(d.pop("action"))

        reason = d.pop("reason")

        resolve_attention = cls(
            action=action,
            reason=reason,
        )

        return resolve_attention
