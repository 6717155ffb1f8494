from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.resolution_payload import ResolutionPayload


T = TypeVar("T", bound="Resolution")


@_attrs_define
class Resolution:
    """
    Attributes:
        decision (str):
        payload (ResolutionPayload):
        resolved_by (str): Who answered: `token:<id>`, or `system:expiry` for a deadline's decision.
        resolved_at (datetime.datetime):
        comment (None | str | Unset): The justification the person gave with the reply, if any.
        resolved_by_name (None | str | Unset): The display name of the token that answered, as it was then.
    """

    decision: str
    payload: ResolutionPayload
    resolved_by: str
    resolved_at: datetime.datetime
    comment: None | str | Unset = UNSET
    resolved_by_name: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        decision = self.decision

        payload = self.payload.to_dict()

        resolved_by = self.resolved_by

        resolved_at = self.resolved_at.isoformat()

        comment: None | str | Unset
        if isinstance(self.comment, Unset):
            comment = UNSET
        else:
            comment = self.comment

        resolved_by_name: None | str | Unset
        if isinstance(self.resolved_by_name, Unset):
            resolved_by_name = UNSET
        else:
            resolved_by_name = self.resolved_by_name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "decision": decision,
                "payload": payload,
                "resolved_by": resolved_by,
                "resolved_at": resolved_at,
            }
        )
        if comment is not UNSET:
            field_dict["comment"] = comment
        if resolved_by_name is not UNSET:
            field_dict["resolved_by_name"] = resolved_by_name

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.resolution_payload import ResolutionPayload

        d = dict(src_dict)
        decision = d.pop("decision")

        payload = ResolutionPayload.from_dict(d.pop("payload"))

        resolved_by = d.pop("resolved_by")

        resolved_at = datetime.datetime.fromisoformat(d.pop("resolved_at"))

        def _parse_comment(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        comment = _parse_comment(d.pop("comment", UNSET))

        def _parse_resolved_by_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        resolved_by_name = _parse_resolved_by_name(d.pop("resolved_by_name", UNSET))

        resolution = cls(
            decision=decision,
            payload=payload,
            resolved_by=resolved_by,
            resolved_at=resolved_at,
            comment=comment,
            resolved_by_name=resolved_by_name,
        )

        resolution.additional_properties = d
        return resolution

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
