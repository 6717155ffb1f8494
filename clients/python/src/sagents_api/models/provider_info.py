from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.capabilities import Capabilities


T = TypeVar("T", bound="ProviderInfo")


@_attrs_define
class ProviderInfo:
    """A registered provider as listed to operators: never its token.

    Attributes:
        provider_id (str):
        base_url (str):
        capabilities (Capabilities): `GET /v3/capabilities`.
        created_at (datetime.datetime):
        updated_at (datetime.datetime):
    """

    provider_id: str
    base_url: str
    capabilities: Capabilities
    created_at: datetime.datetime
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        provider_id = self.provider_id

        base_url = self.base_url

        capabilities = self.capabilities.to_dict()

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "provider_id": provider_id,
                "base_url": base_url,
                "capabilities": capabilities,
                "created_at": created_at,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.capabilities import Capabilities

        d = dict(src_dict)
        provider_id = d.pop("provider_id")

        base_url = d.pop("base_url")

        capabilities = Capabilities.from_dict(d.pop("capabilities"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        provider_info = cls(
            provider_id=provider_id,
            base_url=base_url,
            capabilities=capabilities,
            created_at=created_at,
            updated_at=updated_at,
        )

        provider_info.additional_properties = d
        return provider_info

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
