from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.expiry_default import ExpiryDefault


T = TypeVar("T", bound="TenantPolicy")


@_attrs_define
class TenantPolicy:
    """A tenant's allowances; a tenant the operator never set one for has none.

    Attributes:
        allow_host_network (bool | Unset): Its runs may ask for `network: host`: the host's network, with every service
            listening
            on the host's loopback (the database among them). Default: false.
        interaction_expiry (ExpiryDefault | None | Unset):
    """

    allow_host_network: bool | Unset = UNSET
    interaction_expiry: ExpiryDefault | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.expiry_default import ExpiryDefault

        allow_host_network = self.allow_host_network

        interaction_expiry: dict[str, Any] | None | Unset
        if isinstance(self.interaction_expiry, Unset):
            interaction_expiry = UNSET
        elif isinstance(self.interaction_expiry, ExpiryDefault):
            interaction_expiry = self.interaction_expiry.to_dict()
        else:
            interaction_expiry = self.interaction_expiry

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if allow_host_network is not UNSET:
            field_dict["allow_host_network"] = allow_host_network
        if interaction_expiry is not UNSET:
            field_dict["interaction_expiry"] = interaction_expiry

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.expiry_default import ExpiryDefault

        d = dict(src_dict)
        allow_host_network = d.pop("allow_host_network", UNSET)

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

        tenant_policy = cls(
            allow_host_network=allow_host_network,
            interaction_expiry=interaction_expiry,
        )

        return tenant_policy
