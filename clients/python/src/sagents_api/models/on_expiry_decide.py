from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.on_expiry_decide_action import OnExpiryDecideAction

T = TypeVar("T", bound="OnExpiryDecide")


@_attrs_define
class OnExpiryDecide:
    """
    Attributes:
        decision (str):
        action (OnExpiryDecideAction):
    """

    decision: str
    action: OnExpiryDecideAction
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        decision = self.decision

        action = self.action.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "decision": decision,
                "action": action,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        decision = d.pop("decision")

        action = OnExpiryDecideAction(d.pop("action"))

        on_expiry_decide = cls(
            decision=decision,
            action=action,
        )

        on_expiry_decide.additional_properties = d
        return on_expiry_decide

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
