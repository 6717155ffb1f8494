from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="CheckpointRef")


@_attrs_define
class CheckpointRef:
    """A sandbox's files as archived by `snapshot_and_terminate`; opaque to the service.

    Attributes:
        checkpoint_id (str):
        provider_id (str):
        sandbox_id (str): The sandbox the files were taken from.
        size_bytes (int): Size of the stored archive.
        created_at (datetime.datetime):
        generation (int | Unset): The generation of the compute the files were taken from.
        digest (None | str | Unset): `sha256:` digest of the stored archive, when the provider computes one.
    """

    checkpoint_id: str
    provider_id: str
    sandbox_id: str
    size_bytes: int
    created_at: datetime.datetime
    generation: int | Unset = UNSET
    digest: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        checkpoint_id = self.checkpoint_id

        provider_id = self.provider_id

        sandbox_id = self.sandbox_id

        size_bytes = self.size_bytes

        created_at = self.created_at.isoformat()

        generation = self.generation

        digest: None | str | Unset
        if isinstance(self.digest, Unset):
            digest = UNSET
        else:
            digest = self.digest

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "checkpoint_id": checkpoint_id,
                "provider_id": provider_id,
                "sandbox_id": sandbox_id,
                "size_bytes": size_bytes,
                "created_at": created_at,
            }
        )
        if generation is not UNSET:
            field_dict["generation"] = generation
        if digest is not UNSET:
            field_dict["digest"] = digest

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        checkpoint_id = d.pop("checkpoint_id")

        provider_id = d.pop("provider_id")

        sandbox_id = d.pop("sandbox_id")

        size_bytes = d.pop("size_bytes")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        generation = d.pop("generation", UNSET)

        def _parse_digest(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        digest = _parse_digest(d.pop("digest", UNSET))

        checkpoint_ref = cls(
            checkpoint_id=checkpoint_id,
            provider_id=provider_id,
            sandbox_id=sandbox_id,
            size_bytes=size_bytes,
            created_at=created_at,
            generation=generation,
            digest=digest,
        )

        checkpoint_ref.additional_properties = d
        return checkpoint_ref

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
