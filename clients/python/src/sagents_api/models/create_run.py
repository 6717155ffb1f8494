from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_run_input import CreateRunInput
    from ..models.resolved_sandbox_spec import ResolvedSandboxSpec


T = TypeVar("T", bound="CreateRun")


@_attrs_define
class CreateRun:
    """
    Attributes:
        resolved_spec_hash (str):
        parent_run_id (None | str | Unset):
        sandbox_spec (None | ResolvedSandboxSpec | Unset):
        input_ (CreateRunInput | Unset):
    """

    resolved_spec_hash: str
    parent_run_id: None | str | Unset = UNSET
    sandbox_spec: None | ResolvedSandboxSpec | Unset = UNSET
    input_: CreateRunInput | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.resolved_sandbox_spec import ResolvedSandboxSpec

        resolved_spec_hash = self.resolved_spec_hash

        parent_run_id: None | str | Unset
        if isinstance(self.parent_run_id, Unset):
            parent_run_id = UNSET
        else:
            parent_run_id = self.parent_run_id

        sandbox_spec: dict[str, Any] | None | Unset
        if isinstance(self.sandbox_spec, Unset):
            sandbox_spec = UNSET
        elif isinstance(self.sandbox_spec, ResolvedSandboxSpec):
            sandbox_spec = self.sandbox_spec.to_dict()
        else:
            sandbox_spec = self.sandbox_spec

        input_: dict[str, Any] | Unset = UNSET
        if not isinstance(self.input_, Unset):
            input_ = self.input_.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "resolved_spec_hash": resolved_spec_hash,
            }
        )
        if parent_run_id is not UNSET:
            field_dict["parent_run_id"] = parent_run_id
        if sandbox_spec is not UNSET:
            field_dict["sandbox_spec"] = sandbox_spec
        if input_ is not UNSET:
            field_dict["input"] = input_

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_run_input import CreateRunInput
        from ..models.resolved_sandbox_spec import ResolvedSandboxSpec

        d = dict(src_dict)
        resolved_spec_hash = d.pop("resolved_spec_hash")

        def _parse_parent_run_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        parent_run_id = _parse_parent_run_id(d.pop("parent_run_id", UNSET))

        def _parse_sandbox_spec(data: object) -> None | ResolvedSandboxSpec | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                sandbox_spec_type_1 = ResolvedSandboxSpec.from_dict(data)

                return sandbox_spec_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ResolvedSandboxSpec | Unset, data)

        sandbox_spec = _parse_sandbox_spec(d.pop("sandbox_spec", UNSET))

        _input_ = d.pop("input", UNSET)
        input_: CreateRunInput | Unset
        if isinstance(_input_, Unset):
            input_ = UNSET
        else:
            input_ = CreateRunInput.from_dict(_input_)

        create_run = cls(
            resolved_spec_hash=resolved_spec_hash,
            parent_run_id=parent_run_id,
            sandbox_spec=sandbox_spec,
            input_=input_,
        )

        return create_run
