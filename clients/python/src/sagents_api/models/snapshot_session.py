from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.snapshot_session_metadata import SnapshotSessionMetadata


T = TypeVar("T", bound="SnapshotSession")


@_attrs_define
class SnapshotSession:
    """
    Attributes:
        id (str):
        metadata (SnapshotSessionMetadata):
        revision (int):
        created_at (datetime.datetime):
        updated_at (datetime.datetime):
        title (None | str | Unset):
    """

    id: str
    metadata: SnapshotSessionMetadata
    revision: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    title: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        metadata = self.metadata.to_dict()

        revision = self.revision

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        title: None | str | Unset
        if isinstance(self.title, Unset):
            title = UNSET
        else:
            title = self.title

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "metadata": metadata,
                "revision": revision,
                "created_at": created_at,
                "updated_at": updated_at,
            }
        )
        if title is not UNSET:
            field_dict["title"] = title

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.snapshot_session_metadata import SnapshotSessionMetadata

        d = dict(src_dict)
        id = d.pop("id")

        metadata = SnapshotSessionMetadata.from_dict(d.pop("metadata"))

        revision = d.pop("revision")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_title(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        title = _parse_title(d.pop("title", UNSET))

        snapshot_session = cls(
            id=id,
            metadata=metadata,
            revision=revision,
            created_at=created_at,
            updated_at=updated_at,
            title=title,
        )

        snapshot_session.additional_properties = d
        return snapshot_session

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
