from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..models.job_state import JobState

T = TypeVar("T", bound="UpdateJob")


@_attrs_define
class UpdateJob:
    """
    Attributes:
        state (JobState):
    """

    state: JobState

    def to_dict(self) -> dict[str, Any]:
        state = self.state.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "state": state,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        state = JobState(d.pop("state"))

        update_job = cls(
            state=state,
        )

        return update_job
