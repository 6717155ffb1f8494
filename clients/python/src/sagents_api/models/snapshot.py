from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.pending_interaction import PendingInteraction
    from ..models.snapshot_run import SnapshotRun
    from ..models.snapshot_session import SnapshotSession


T = TypeVar("T", bound="Snapshot")


@_attrs_define
class Snapshot:
    """
    Attributes:
        session (SnapshotSession):
        runs (list[SnapshotRun]):
        pending_interactions (list[PendingInteraction]):
    """

    session: SnapshotSession
    runs: list[SnapshotRun]
    pending_interactions: list[PendingInteraction]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        session = self.session.to_dict()

        runs = []
        for runs_item_data in self.runs:
            runs_item = runs_item_data.to_dict()
            runs.append(runs_item)

        pending_interactions = []
        for pending_interactions_item_data in self.pending_interactions:
            pending_interactions_item = pending_interactions_item_data.to_dict()
            pending_interactions.append(pending_interactions_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "session": session,
                "runs": runs,
                "pending_interactions": pending_interactions,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.pending_interaction import PendingInteraction
        from ..models.snapshot_run import SnapshotRun
        from ..models.snapshot_session import SnapshotSession

        d = dict(src_dict)
        session = SnapshotSession.from_dict(d.pop("session"))

        runs = []
        _runs = d.pop("runs")
        for runs_item_data in _runs:
            runs_item = SnapshotRun.from_dict(runs_item_data)

            runs.append(runs_item)

        pending_interactions = []
        _pending_interactions = d.pop("pending_interactions")
        for pending_interactions_item_data in _pending_interactions:
            pending_interactions_item = PendingInteraction.from_dict(
                pending_interactions_item_data
            )

            pending_interactions.append(pending_interactions_item)

        snapshot = cls(
            session=session,
            runs=runs,
            pending_interactions=pending_interactions,
        )

        snapshot.additional_properties = d
        return snapshot

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
