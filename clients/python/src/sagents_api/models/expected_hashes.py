from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ExpectedHashes")


@_attrs_define
class ExpectedHashes:
    """
    Attributes:
        resolved_spec_hash (str):
        spec_hash (None | str | Unset):
        policy_hash (None | str | Unset):
    """

    resolved_spec_hash: str
    spec_hash: None | str | Unset = UNSET
    policy_hash: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        resolved_spec_hash = self.resolved_spec_hash

        spec_hash: None | str | Unset
        if isinstance(self.spec_hash, Unset):
            spec_hash = UNSET
        else:
            spec_hash = self.spec_hash

        policy_hash: None | str | Unset
        if isinstance(self.policy_hash, Unset):
            policy_hash = UNSET
        else:
            policy_hash = self.policy_hash

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "resolved_spec_hash": resolved_spec_hash,
            }
        )
        if spec_hash is not UNSET:
            field_dict["spec_hash"] = spec_hash
        if policy_hash is not UNSET:
            field_dict["policy_hash"] = policy_hash

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        resolved_spec_hash = d.pop("resolved_spec_hash")

        def _parse_spec_hash(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        spec_hash = _parse_spec_hash(d.pop("spec_hash", UNSET))

        def _parse_policy_hash(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        policy_hash = _parse_policy_hash(d.pop("policy_hash", UNSET))

        expected_hashes = cls(
            resolved_spec_hash=resolved_spec_hash,
            spec_hash=spec_hash,
            policy_hash=policy_hash,
        )

        expected_hashes.additional_properties = d
        return expected_hashes

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
