from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.expiry_action import ExpiryAction
from ..types import UNSET, Unset

T = TypeVar("T", bound="OnExpiry")


@_attrs_define
class OnExpiry:
    """What happens when a pending interaction's deadline passes: its run fails (`fail`, the
    default), is cancelled (`cancel`), or goes on with `decision`, one of the interaction's
    allowed decisions, recorded as resolved by `system:expiry` (`decide`).

        Attributes:
            action (ExpiryAction):
            decision (None | str | Unset): With `decide` (and only then): the decision the deadline makes.
    """

    action: ExpiryAction
    decision: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        action = self.action.value

        decision: None | str | Unset
        if isinstance(self.decision, Unset):
            decision = UNSET
        else:
            decision = self.decision

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "action": action,
            }
        )
        if decision is not UNSET:
            field_dict["decision"] = decision

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        action = ExpiryAction(d.pop("action"))

        def _parse_decision(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        decision = _parse_decision(d.pop("decision", UNSET))

        on_expiry = cls(
            action=action,
            decision=decision,
        )

        return on_expiry
