from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.session_event_data import SessionEventData


T = TypeVar("T", bound="SessionEvent")


@_attrs_define
class SessionEvent:
    """One entry of the durable per-session audit log.

    Attributes:
        session_id (str):
        sequence (int):
        type_ (str):
        data (SessionEventData):
        created_at (datetime.datetime):
    """

    session_id: str
    sequence: int
    type_: str
    data: SessionEventData
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        session_id = self.session_id

        sequence = self.sequence

        type_ = self.type_

        data = self.data.to_dict()

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "session_id": session_id,
                "sequence": sequence,
                "type": type_,
                "data": data,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.session_event_data import SessionEventData

        d = dict(src_dict)
        session_id = d.pop("session_id")

        sequence = d.pop("sequence")

        type_ = d.pop("type")

        data = SessionEventData.from_dict(d.pop("data"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        session_event = cls(
            session_id=session_id,
            sequence=sequence,
            type_=type_,
            data=data,
            created_at=created_at,
        )

        session_event.additional_properties = d
        return session_event

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
