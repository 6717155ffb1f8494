from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.release_disposition import ReleaseDisposition
from ..types import UNSET, Unset

T = TypeVar("T", bound="Capabilities")


@_attrs_define
class Capabilities:
    """`GET /v3/capabilities`.

    Attributes:
        api_version (str): Must be `"3"`.
        capability (str): Must be `execution.sandbox`.
        provider_id (str):
        provider_version (str):
        isolation_level (str):
        supported_release_dispositions (list[ReleaseDisposition]):
        supports_snapshot (bool):
        supports_restore (bool):
        supports_reconnect (bool):
        max_lifetime_seconds (int | None | Unset):
        supports_exec (bool | Unset): Whether `POST /v3/sandboxes/{id}/exec` is offered (reference provider extension).
        supports_inventory (bool | Unset): Whether `GET /v3/sandboxes` and `GET /v3/checkpoints` list what the provider
            holds.
        supports_checkpoint_delete (bool | Unset): Whether `DELETE /v3/checkpoints/{checkpoint_id}` is offered.
        unauthenticated (bool | Unset): The provider serves without a token (reference provider's `--insecure-no-auth`):
            anyone who reaches it may provision, release and restore.
        bounded_resources (list[str] | Unset): The spec's `resources` the provider bounds for a sandbox as a whole
            (`max_processes`,
            `memory_mb`, `cpu_percent`); a spec that sets another is refused, never ignored.
    """

    api_version: str
    capability: str
    provider_id: str
    provider_version: str
    isolation_level: str
    supported_release_dispositions: list[ReleaseDisposition]
    supports_snapshot: bool
    supports_restore: bool
    supports_reconnect: bool
    max_lifetime_seconds: int | None | Unset = UNSET
    supports_exec: bool | Unset = UNSET
    supports_inventory: bool | Unset = UNSET
    supports_checkpoint_delete: bool | Unset = UNSET
    unauthenticated: bool | Unset = UNSET
    bounded_resources: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        api_version = self.api_version

        capability = self.capability

        provider_id = self.provider_id

        provider_version = self.provider_version

        isolation_level = self.isolation_level

        supported_release_dispositions = []
        for (
            supported_release_dispositions_item_data
        ) in self.supported_release_dispositions:
            supported_release_dispositions_item = (
                supported_release_dispositions_item_data.value
            )
            supported_release_dispositions.append(supported_release_dispositions_item)

        supports_snapshot = self.supports_snapshot

        supports_restore = self.supports_restore

        supports_reconnect = self.supports_reconnect

        max_lifetime_seconds: int | None | Unset
        if isinstance(self.max_lifetime_seconds, Unset):
            max_lifetime_seconds = UNSET
        else:
            max_lifetime_seconds = self.max_lifetime_seconds

        supports_exec = self.supports_exec

        supports_inventory = self.supports_inventory

        supports_checkpoint_delete = self.supports_checkpoint_delete

        unauthenticated = self.unauthenticated

        bounded_resources: list[str] | Unset = UNSET
        if not isinstance(self.bounded_resources, Unset):
            bounded_resources = self.bounded_resources

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "api_version": api_version,
                "capability": capability,
                "provider_id": provider_id,
                "provider_version": provider_version,
                "isolation_level": isolation_level,
                "supported_release_dispositions": supported_release_dispositions,
                "supports_snapshot": supports_snapshot,
                "supports_restore": supports_restore,
                "supports_reconnect": supports_reconnect,
            }
        )
        if max_lifetime_seconds is not UNSET:
            field_dict["max_lifetime_seconds"] = max_lifetime_seconds
        if supports_exec is not UNSET:
            field_dict["supports_exec"] = supports_exec
        if supports_inventory is not UNSET:
            field_dict["supports_inventory"] = supports_inventory
        if supports_checkpoint_delete is not UNSET:
            field_dict["supports_checkpoint_delete"] = supports_checkpoint_delete
        if unauthenticated is not UNSET:
            field_dict["unauthenticated"] = unauthenticated
        if bounded_resources is not UNSET:
            field_dict["bounded_resources"] = bounded_resources

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        api_version = d.pop("api_version")

        capability = d.pop("capability")

        provider_id = d.pop("provider_id")

        provider_version = d.pop("provider_version")

        isolation_level = d.pop("isolation_level")

        supported_release_dispositions = []
        _supported_release_dispositions = d.pop("supported_release_dispositions")
        for supported_release_dispositions_item_data in _supported_release_dispositions:
            supported_release_dispositions_item = ReleaseDisposition(
                supported_release_dispositions_item_data
            )

            supported_release_dispositions.append(supported_release_dispositions_item)

        supports_snapshot = d.pop("supports_snapshot")

        supports_restore = d.pop("supports_restore")

        supports_reconnect = d.pop("supports_reconnect")

        def _parse_max_lifetime_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_lifetime_seconds = _parse_max_lifetime_seconds(
            d.pop("max_lifetime_seconds", UNSET)
        )

        supports_exec = d.pop("supports_exec", UNSET)

        supports_inventory = d.pop("supports_inventory", UNSET)

        supports_checkpoint_delete = d.pop("supports_checkpoint_delete", UNSET)

        unauthenticated = d.pop("unauthenticated", UNSET)

        bounded_resources = cast(list[str], d.pop("bounded_resources", UNSET))

        capabilities = cls(
            api_version=api_version,
            capability=capability,
            provider_id=provider_id,
            provider_version=provider_version,
            isolation_level=isolation_level,
            supported_release_dispositions=supported_release_dispositions,
            supports_snapshot=supports_snapshot,
            supports_restore=supports_restore,
            supports_reconnect=supports_reconnect,
            max_lifetime_seconds=max_lifetime_seconds,
            supports_exec=supports_exec,
            supports_inventory=supports_inventory,
            supports_checkpoint_delete=supports_checkpoint_delete,
            unauthenticated=unauthenticated,
            bounded_resources=bounded_resources,
        )

        capabilities.additional_properties = d
        return capabilities

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
