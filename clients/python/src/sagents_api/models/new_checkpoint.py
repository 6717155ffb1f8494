from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.new_checkpoint_state import NewCheckpointState


T = TypeVar("T", bound="NewCheckpoint")


@_attrs_define
class NewCheckpoint:
    """
    Attributes:
        codec_version (str):
        sequence (int):
        state (NewCheckpointState):
        resolved_spec_hash (str):
    """

    codec_version: str
    sequence: int
    state: NewCheckpointState
    resolved_spec_hash: str

    def to_dict(self) -> dict[str, Any]:
        codec_version = self.codec_version

        sequence = self.sequence

        state = self.state.to_dict()

        resolved_spec_hash = self.resolved_spec_hash

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "codec_version": codec_version,
                "sequence": sequence,
                "state": state,
                "resolved_spec_hash": resolved_spec_hash,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.new_checkpoint_state import NewCheckpointState

        d = dict(src_dict)
        codec_version = d.pop("codec_version")

        sequence = d.pop("sequence")

        state = NewCheckpointState.from_dict(d.pop("state"))

        resolved_spec_hash = d.pop("resolved_spec_hash")

        new_checkpoint = cls(
            codec_version=codec_version,
            sequence=sequence,
            state=state,
            resolved_spec_hash=resolved_spec_hash,
        )

        return new_checkpoint
