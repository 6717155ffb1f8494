from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.run_state import RunState
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.resolved_sandbox_spec import ResolvedSandboxSpec
    from ..models.run_error_type_0 import RunErrorType0
    from ..models.run_input import RunInput
    from ..models.run_output_type_0 import RunOutputType0


T = TypeVar("T", bound="Run")


@_attrs_define
class Run:
    """A run as the runtime API returns it.

    Attributes:
        id (str):
        session_id (str):
        state (RunState): Internal run state.
        resolved_spec_hash (str):
        input_ (RunInput):
        revision (int):
        created_at (datetime.datetime):
        updated_at (datetime.datetime):
        parent_run_id (None | str | Unset):
        sandbox_spec (None | ResolvedSandboxSpec | Unset):
        output (None | RunOutputType0 | Unset):
        error (None | RunErrorType0 | Unset):
    """

    id: str
    session_id: str
    state: RunState
    resolved_spec_hash: str
    input_: RunInput
    revision: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    parent_run_id: None | str | Unset = UNSET
    sandbox_spec: None | ResolvedSandboxSpec | Unset = UNSET
    output: None | RunOutputType0 | Unset = UNSET
    error: None | RunErrorType0 | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.resolved_sandbox_spec import ResolvedSandboxSpec
        from ..models.run_error_type_0 import RunErrorType0
        from ..models.run_output_type_0 import RunOutputType0

        id = self.id

        session_id = self.session_id

        state = self.state.value

        resolved_spec_hash = self.resolved_spec_hash

        input_ = self.input_.to_dict()

        revision = self.revision

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

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

        output: dict[str, Any] | None | Unset
        if isinstance(self.output, Unset):
            output = UNSET
        elif isinstance(self.output, RunOutputType0):
            output = self.output.to_dict()
        else:
            output = self.output

        error: dict[str, Any] | None | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        elif isinstance(self.error, RunErrorType0):
            error = self.error.to_dict()
        else:
            error = self.error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "session_id": session_id,
                "state": state,
                "resolved_spec_hash": resolved_spec_hash,
                "input": input_,
                "revision": revision,
                "created_at": created_at,
                "updated_at": updated_at,
            }
        )
        if parent_run_id is not UNSET:
            field_dict["parent_run_id"] = parent_run_id
        if sandbox_spec is not UNSET:
            field_dict["sandbox_spec"] = sandbox_spec
        if output is not UNSET:
            field_dict["output"] = output
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.resolved_sandbox_spec import ResolvedSandboxSpec
        from ..models.run_error_type_0 import RunErrorType0
        from ..models.run_input import RunInput
        from ..models.run_output_type_0 import RunOutputType0

        d = dict(src_dict)
        id = d.pop("id")

        session_id = d.pop("session_id")

        state = RunState(d.pop("state"))

        resolved_spec_hash = d.pop("resolved_spec_hash")

        input_ = RunInput.from_dict(d.pop("input"))

        revision = d.pop("revision")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

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

        def _parse_output(data: object) -> None | RunOutputType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                output_type_0 = RunOutputType0.from_dict(data)

                return output_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunOutputType0 | Unset, data)

        output = _parse_output(d.pop("output", UNSET))

        def _parse_error(data: object) -> None | RunErrorType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                error_type_0 = RunErrorType0.from_dict(data)

                return error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | RunErrorType0 | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        run = cls(
            id=id,
            session_id=session_id,
            state=state,
            resolved_spec_hash=resolved_spec_hash,
            input_=input_,
            revision=revision,
            created_at=created_at,
            updated_at=updated_at,
            parent_run_id=parent_run_id,
            sandbox_spec=sandbox_spec,
            output=output,
            error=error,
        )

        run.additional_properties = d
        return run

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
