from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.pending_interaction import PendingInteraction


T = TypeVar("T", bound="InboxItem")


@_attrs_define
class InboxItem:
    """One pending interaction and the session it belongs to.

    Attributes:
        session_id (str):
        interaction (PendingInteraction):
    """

    session_id: str
    interaction: PendingInteraction
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        session_id = self.session_id

        interaction = self.interaction.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "session_id": session_id,
                "interaction": interaction,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.pending_interaction import PendingInteraction

        d = dict(src_dict)
        session_id = d.pop("session_id")

        interaction = PendingInteraction.from_dict(d.pop("interaction"))

        inbox_item = cls(
            session_id=session_id,
            interaction=interaction,
        )

        inbox_item.additional_properties = d
        return inbox_item

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
