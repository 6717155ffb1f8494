from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.resource_event_data import ResourceEventData


T = TypeVar("T", bound="ResourceEvent")


@_attrs_define
class ResourceEvent:
    """One entry of a run's execution-resource history. `sequence` is the record's version after
    the write that logged it (entries from before this log existed are numbered from 1).

        Attributes:
            run_id (str):
            sequence (int):
            type_ (str):
            data (ResourceEventData):
            created_at (datetime.datetime):
    """

    run_id: str
    sequence: int
    type_: str
    data: ResourceEventData
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        run_id = self.run_id

        sequence = self.sequence

        type_ = self.type_

        data = self.data.to_dict()

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run_id": run_id,
                "sequence": sequence,
                "type": type_,
                "data": data,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.resource_event_data import ResourceEventData

        d = dict(src_dict)
        run_id = d.pop("run_id")

        sequence = d.pop("sequence")

        type_ = d.pop("type")

        data = ResourceEventData.from_dict(d.pop("data"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        resource_event = cls(
            run_id=run_id,
            sequence=sequence,
            type_=type_,
            data=data,
            created_at=created_at,
        )

        resource_event.additional_properties = d
        return resource_event

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
