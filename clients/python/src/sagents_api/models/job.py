from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.execution_affinity import ExecutionAffinity
from ..models.job_state import JobState
from ..models.pause_behavior import PauseBehavior

if TYPE_CHECKING:
    from ..models.job_payload import JobPayload


T = TypeVar("T", bound="Job")


@_attrs_define
class Job:
    """
    Attributes:
        id (str):
        run_id (str):
        kind (str):
        payload (JobPayload):
        pause_behavior (PauseBehavior):
        execution_affinity (ExecutionAffinity):
        state (JobState):
        created_at (datetime.datetime):
        updated_at (datetime.datetime):
    """

    id: str
    run_id: str
    kind: str
    payload: JobPayload
    pause_behavior: PauseBehavior
    execution_affinity: ExecutionAffinity
    state: JobState
    created_at: datetime.datetime
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        run_id = self.run_id

        kind = self.kind

        payload = self.payload.to_dict()

        pause_behavior = self.pause_behavior.value

        execution_affinity = self.execution_affinity.value

        state = self.state.value

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "run_id": run_id,
                "kind": kind,
                "payload": payload,
                "pause_behavior": pause_behavior,
                "execution_affinity": execution_affinity,
                "state": state,
                "created_at": created_at,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.job_payload import JobPayload

        d = dict(src_dict)
        id = d.pop("id")

        run_id = d.pop("run_id")

        kind = d.pop("kind")

        payload = JobPayload.from_dict(d.pop("payload"))

        pause_behavior = PauseBehavior(d.pop("pause_behavior"))

        execution_affinity = ExecutionAffinity(d.pop("execution_affinity"))

        state = JobState(d.pop("state"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        job = cls(
            id=id,
            run_id=run_id,
            kind=kind,
            payload=payload,
            pause_behavior=pause_behavior,
            execution_affinity=execution_affinity,
            state=state,
            created_at=created_at,
            updated_at=updated_at,
        )

        job.additional_properties = d
        return job

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
