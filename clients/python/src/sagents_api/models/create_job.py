from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.execution_affinity import ExecutionAffinity
from ..models.pause_behavior import PauseBehavior
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.create_job_payload import CreateJobPayload


T = TypeVar("T", bound="CreateJob")


@_attrs_define
class CreateJob:
    """
    Attributes:
        fencing_token (int):
        kind (str):
        payload (CreateJobPayload | Unset):
        pause_behavior (None | PauseBehavior | Unset):
        execution_affinity (ExecutionAffinity | None | Unset):
    """

    fencing_token: int
    kind: str
    payload: CreateJobPayload | Unset = UNSET
    pause_behavior: None | PauseBehavior | Unset = UNSET
    execution_affinity: ExecutionAffinity | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        fencing_token = self.fencing_token

        kind = self.kind

        payload: dict[str, Any] | Unset = UNSET
        if not isinstance(self.payload, Unset):
            payload = self.payload.to_dict()

        pause_behavior: None | str | Unset
        if isinstance(self.pause_behavior, Unset):
            pause_behavior = UNSET
        elif isinstance(self.pause_behavior, PauseBehavior):
            pause_behavior = self.pause_behavior.value
        else:
            pause_behavior = self.pause_behavior

        execution_affinity: None | str | Unset
        if isinstance(self.execution_affinity, Unset):
            execution_affinity = UNSET
        elif isinstance(self.execution_affinity, ExecutionAffinity):
            execution_affinity = self.execution_affinity.value
        else:
            execution_affinity = self.execution_affinity

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "fencing_token": fencing_token,
                "kind": kind,
            }
        )
        if payload is not UNSET:
            field_dict["payload"] = payload
        if pause_behavior is not UNSET:
            field_dict["pause_behavior"] = pause_behavior
        if execution_affinity is not UNSET:
            field_dict["execution_affinity"] = execution_affinity

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.create_job_payload import CreateJobPayload

        d = dict(src_dict)
        fencing_token = d.pop("fencing_token")

        kind = d.pop("kind")

        _payload = d.pop("payload", UNSET)
        payload: CreateJobPayload | Unset
        if isinstance(_payload, Unset):
            payload = UNSET
        else:
            payload = CreateJobPayload.from_dict(_payload)

        def _parse_pause_behavior(data: object) -> None | PauseBehavior | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                pause_behavior_type_1 = PauseBehavior(data)

                return pause_behavior_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | PauseBehavior | Unset, data)

        pause_behavior = _parse_pause_behavior(d.pop("pause_behavior", UNSET))

        def _parse_execution_affinity(data: object) -> ExecutionAffinity | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                execution_affinity_type_1 = ExecutionAffinity(data)

                return execution_affinity_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ExecutionAffinity | None | Unset, data)

        execution_affinity = _parse_execution_affinity(
            d.pop("execution_affinity", UNSET)
        )

        create_job = cls(
            fencing_token=fencing_token,
            kind=kind,
            payload=payload,
            pause_behavior=pause_behavior,
            execution_affinity=execution_affinity,
        )

        return create_job
