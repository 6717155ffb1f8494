from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="SandboxRef")


@_attrs_define
class SandboxRef:
    """The sandbox a record is bound to, as the provider named it.

    Attributes:
        sandbox_id (str):
        provider_id (str):
        provider_version (str):
        tenant_id (str):
        owner_run_id (str):
        spec_hash (str):
        policy_hash (str):
    """

    sandbox_id: str
    provider_id: str
    provider_version: str
    tenant_id: str
    owner_run_id: str
    spec_hash: str
    policy_hash: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sandbox_id = self.sandbox_id

        provider_id = self.provider_id

        provider_version = self.provider_version

        tenant_id = self.tenant_id

        owner_run_id = self.owner_run_id

        spec_hash = self.spec_hash

        policy_hash = self.policy_hash

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sandbox_id": sandbox_id,
                "provider_id": provider_id,
                "provider_version": provider_version,
                "tenant_id": tenant_id,
                "owner_run_id": owner_run_id,
                "spec_hash": spec_hash,
                "policy_hash": policy_hash,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sandbox_id = d.pop("sandbox_id")

        provider_id = d.pop("provider_id")

        provider_version = d.pop("provider_version")

        tenant_id = d.pop("tenant_id")

        owner_run_id = d.pop("owner_run_id")

        spec_hash = d.pop("spec_hash")

        policy_hash = d.pop("policy_hash")

        sandbox_ref = cls(
            sandbox_id=sandbox_id,
            provider_id=provider_id,
            provider_version=provider_version,
            tenant_id=tenant_id,
            owner_run_id=owner_run_id,
            spec_hash=spec_hash,
            policy_hash=policy_hash,
        )

        sandbox_ref.additional_properties = d
        return sandbox_ref

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
