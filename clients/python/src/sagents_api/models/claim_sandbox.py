from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.sandbox_ref import SandboxRef


T = TypeVar("T", bound="ClaimSandbox")


@_attrs_define
class ClaimSandbox:
    """What a sandbox-backed claim carries so the runtime can operate in its sandbox.

    Attributes:
        ref (SandboxRef): The sandbox a record is bound to, as the provider named it.
        generation (int):
        grant (str): Lets the runtime exec in the sandbox until the lease ends. Empty in an
            `Idempotency-Key` replay (no grant is stored): heartbeat the lease for a fresh one.
    """

    ref: SandboxRef
    generation: int
    grant: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ref = self.ref.to_dict()

        generation = self.generation

        grant = self.grant

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ref": ref,
                "generation": generation,
                "grant": grant,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.sandbox_ref import SandboxRef

        d = dict(src_dict)
        ref = SandboxRef.from_dict(d.pop("ref"))

        generation = d.pop("generation")

        grant = d.pop("grant")

        claim_sandbox = cls(
            ref=ref,
            generation=generation,
            grant=grant,
        )

        claim_sandbox.additional_properties = d
        return claim_sandbox

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
