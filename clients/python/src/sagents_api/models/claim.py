from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.claim_kind import ClaimKind
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.checkpoint import Checkpoint
    from ..models.claim_sandbox import ClaimSandbox
    from ..models.expected_hashes import ExpectedHashes
    from ..models.lease import Lease
    from ..models.run import Run


T = TypeVar("T", bound="Claim")


@_attrs_define
class Claim:
    """
    Attributes:
        kind (ClaimKind):
        run (Run): A run as the runtime API returns it.
        lease (Lease):
        expected (ExpectedHashes):
        checkpoint (Checkpoint | None | Unset):
        sandbox (ClaimSandbox | None | Unset):
    """

    kind: ClaimKind
    run: Run
    lease: Lease
    expected: ExpectedHashes
    checkpoint: Checkpoint | None | Unset = UNSET
    sandbox: ClaimSandbox | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.checkpoint import Checkpoint
        from ..models.claim_sandbox import ClaimSandbox

        kind = self.kind.value

        run = self.run.to_dict()

        lease = self.lease.to_dict()

        expected = self.expected.to_dict()

        checkpoint: dict[str, Any] | None | Unset
        if isinstance(self.checkpoint, Unset):
            checkpoint = UNSET
        elif isinstance(self.checkpoint, Checkpoint):
            checkpoint = self.checkpoint.to_dict()
        else:
            checkpoint = self.checkpoint

        sandbox: dict[str, Any] | None | Unset
        if isinstance(self.sandbox, Unset):
            sandbox = UNSET
        elif isinstance(self.sandbox, ClaimSandbox):
            sandbox = self.sandbox.to_dict()
        else:
            sandbox = self.sandbox

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
                "run": run,
                "lease": lease,
                "expected": expected,
            }
        )
        if checkpoint is not UNSET:
            field_dict["checkpoint"] = checkpoint
        if sandbox is not UNSET:
            field_dict["sandbox"] = sandbox

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.checkpoint import Checkpoint
        from ..models.claim_sandbox import ClaimSandbox
        from ..models.expected_hashes import ExpectedHashes
        from ..models.lease import Lease
        from ..models.run import Run

        d = dict(src_dict)
        kind = ClaimKind(d.pop("kind"))

        run = Run.from_dict(d.pop("run"))

        lease = Lease.from_dict(d.pop("lease"))

        expected = ExpectedHashes.from_dict(d.pop("expected"))

        def _parse_checkpoint(data: object) -> Checkpoint | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                checkpoint_type_1 = Checkpoint.from_dict(data)

                return checkpoint_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Checkpoint | None | Unset, data)

        checkpoint = _parse_checkpoint(d.pop("checkpoint", UNSET))

        def _parse_sandbox(data: object) -> ClaimSandbox | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                sandbox_type_1 = ClaimSandbox.from_dict(data)

                return sandbox_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ClaimSandbox | None | Unset, data)

        sandbox = _parse_sandbox(d.pop("sandbox", UNSET))

        claim = cls(
            kind=kind,
            run=run,
            lease=lease,
            expected=expected,
            checkpoint=checkpoint,
            sandbox=sandbox,
        )

        claim.additional_properties = d
        return claim

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
