from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="RegisterProvider")


@_attrs_define
class RegisterProvider:
    """`POST /v1/admin/providers`.

    Attributes:
        provider_id (str):
        base_url (str): `http://` or `https://`.
        token (str): The provider's own bearer token; stored, never listed.
    """

    provider_id: str
    base_url: str
    token: str

    def to_dict(self) -> dict[str, Any]:
        provider_id = self.provider_id

        base_url = self.base_url

        token = self.token

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "provider_id": provider_id,
                "base_url": base_url,
                "token": token,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        provider_id = d.pop("provider_id")

        base_url = d.pop("base_url")

        token = d.pop("token")

        register_provider = cls(
            provider_id=provider_id,
            base_url=base_url,
            token=token,
        )

        return register_provider
