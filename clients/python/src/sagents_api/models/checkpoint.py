from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.checkpoint_state import CheckpointState


T = TypeVar("T", bound="Checkpoint")


@_attrs_define
class Checkpoint:
    """The agent's own checkpoint (not the sandbox's). Immutable once written.

    Attributes:
        id (str):
        run_id (str):
        sequence (int):
        codec_version (str):
        state (CheckpointState):
        resolved_spec_hash (str):
        created_at (datetime.datetime):
    """

    id: str
    run_id: str
    sequence: int
    codec_version: str
    state: CheckpointState
    resolved_spec_hash: str
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        run_id = self.run_id

        sequence = self.sequence

        codec_version = self.codec_version

        state = self.state.to_dict()

        resolved_spec_hash = self.resolved_spec_hash

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "run_id": run_id,
                "sequence": sequence,
                "codec_version": codec_version,
                "state": state,
                "resolved_spec_hash": resolved_spec_hash,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.checkpoint_state import CheckpointState

        d = dict(src_dict)
        id = d.pop("id")

        run_id = d.pop("run_id")

        sequence = d.pop("sequence")

        codec_version = d.pop("codec_version")

        state = CheckpointState.from_dict(d.pop("state"))

        resolved_spec_hash = d.pop("resolved_spec_hash")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        checkpoint = cls(
            id=id,
            run_id=run_id,
            sequence=sequence,
            codec_version=codec_version,
            state=state,
            resolved_spec_hash=resolved_spec_hash,
            created_at=created_at,
        )

        checkpoint.additional_properties = d
        return checkpoint

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
