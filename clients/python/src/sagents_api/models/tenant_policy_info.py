from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.expiry_default import ExpiryDefault


T = TypeVar("T", bound="TenantPolicyInfo")


@_attrs_define
class TenantPolicyInfo:
    """A tenant's policy as stored.

    Attributes:
        tenant (str):
        allow_host_network (bool):
        interaction_expiry (ExpiryDefault | None | Unset):
        updated_at (datetime.datetime | None | Unset): When an operator last set it; null when it was never set (the
            defaults).
    """

    tenant: str
    allow_host_network: bool
    interaction_expiry: ExpiryDefault | None | Unset = UNSET
    updated_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.expiry_default import ExpiryDefault

        tenant = self.tenant

        allow_host_network = self.allow_host_network

        interaction_expiry: dict[str, Any] | None | Unset
        if isinstance(self.interaction_expiry, Unset):
            interaction_expiry = UNSET
        elif isinstance(self.interaction_expiry, ExpiryDefault):
            interaction_expiry = self.interaction_expiry.to_dict()
        else:
            interaction_expiry = self.interaction_expiry

        updated_at: None | str | Unset
        if isinstance(self.updated_at, Unset):
            updated_at = UNSET
        elif isinstance(self.updated_at, datetime.datetime):
            updated_at = self.updated_at.isoformat()
        else:
            updated_at = self.updated_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "tenant": tenant,
                "allow_host_network": allow_host_network,
            }
        )
        if interaction_expiry is not UNSET:
            field_dict["interaction_expiry"] = interaction_expiry
        if updated_at is not UNSET:
            field_dict["updated_at"] = updated_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.expiry_default import ExpiryDefault

        d = dict(src_dict)
        tenant = d.pop("tenant")

        allow_host_network = d.pop("allow_host_network")

        def _parse_interaction_expiry(data: object) -> ExpiryDefault | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                interaction_expiry_type_1 = ExpiryDefault.from_dict(data)

                return interaction_expiry_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ExpiryDefault | None | Unset, data)

        interaction_expiry = _parse_interaction_expiry(
            d.pop("interaction_expiry", UNSET)
        )

        def _parse_updated_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                updated_at_type_0 = datetime.datetime.fromisoformat(data)

                return updated_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        updated_at = _parse_updated_at(d.pop("updated_at", UNSET))

        tenant_policy_info = cls(
            tenant=tenant,
            allow_host_network=allow_host_network,
            interaction_expiry=interaction_expiry,
            updated_at=updated_at,
        )

        tenant_policy_info.additional_properties = d
        return tenant_policy_info

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
