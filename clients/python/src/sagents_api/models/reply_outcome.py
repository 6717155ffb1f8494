from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.run_status import RunStatus

if TYPE_CHECKING:
    from ..models.interaction_request import InteractionRequest


T = TypeVar("T", bound="ReplyOutcome")


@_attrs_define
class ReplyOutcome:
    """
    Attributes:
        interaction (InteractionRequest):
        run_status (RunStatus): The word a frontend shows for a run.
    """

    interaction: InteractionRequest
    run_status: RunStatus
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        interaction = self.interaction.to_dict()

        run_status = self.run_status.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "interaction": interaction,
                "run_status": run_status,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.interaction_request import InteractionRequest

        d = dict(src_dict)
        interaction = InteractionRequest.from_dict(d.pop("interaction"))

        run_status = RunStatus(d.pop("run_status"))

        reply_outcome = cls(
            interaction=interaction,
            run_status=run_status,
        )

        reply_outcome.additional_properties = d
        return reply_outcome

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
