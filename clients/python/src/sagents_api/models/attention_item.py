from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.execution_resource_record import ExecutionResourceRecord


T = TypeVar("T", bound="AttentionItem")


@_attrs_define
class AttentionItem:
    """A `needs_attention` record, with its tenant and when it entered that state.

    Attributes:
        tenant_id (str):
        since (datetime.datetime):
        record (ExecutionResourceRecord):
    """

    tenant_id: str
    since: datetime.datetime
    record: ExecutionResourceRecord
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        tenant_id = self.tenant_id

        since = self.since.isoformat()

        record = self.record.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "tenant_id": tenant_id,
                "since": since,
                "record": record,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.execution_resource_record import ExecutionResourceRecord

        d = dict(src_dict)
        tenant_id = d.pop("tenant_id")

        since = datetime.datetime.fromisoformat(d.pop("since"))

        record = ExecutionResourceRecord.from_dict(d.pop("record"))

        attention_item = cls(
            tenant_id=tenant_id,
            since=since,
            record=record,
        )

        attention_item.additional_properties = d
        return attention_item

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
