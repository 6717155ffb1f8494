from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.role import Role
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateToken")


@_attrs_define
class CreateToken:
    """
    Attributes:
        role (Role):
        tenant (None | str | Unset): Tenant of a frontend or runtime token (default `default`); admin and metrics tokens
            take none.
        ttl_seconds (int | None | Unset): Seconds until the token expires (at most ten years); it never expires when
            absent.
        name (None | str | Unset): Who uses it, as people should read it: kept beside the token's id with each decision
            it makes (`resolved_by_name`).
    """

    role: Role
    tenant: None | str | Unset = UNSET
    ttl_seconds: int | None | Unset = UNSET
    name: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        role = self.role.value

        tenant: None | str | Unset
        if isinstance(self.tenant, Unset):
            tenant = UNSET
        else:
            tenant = self.tenant

        ttl_seconds: int | None | Unset
        if isinstance(self.ttl_seconds, Unset):
            ttl_seconds = UNSET
        else:
            ttl_seconds = self.ttl_seconds

        name: None | str | Unset
        if isinstance(self.name, Unset):
            name = UNSET
        else:
            name = self.name

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "role": role,
            }
        )
        if tenant is not UNSET:
            field_dict["tenant"] = tenant
        if ttl_seconds is not UNSET:
            field_dict["ttl_seconds"] = ttl_seconds
        if name is not UNSET:
            field_dict["name"] = name

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        role = Role(d.pop("role"))

        def _parse_tenant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tenant = _parse_tenant(d.pop("tenant", UNSET))

        def _parse_ttl_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ttl_seconds = _parse_ttl_seconds(d.pop("ttl_seconds", UNSET))

        def _parse_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        name = _parse_name(d.pop("name", UNSET))

        create_token = cls(
            role=role,
            tenant=tenant,
            ttl_seconds=ttl_seconds,
            name=name,
        )

        return create_token
