from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.suspension_reason import SuspensionReason
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.new_checkpoint import NewCheckpoint
    from ..models.new_interaction import NewInteraction


T = TypeVar("T", bound="SuspendRun")


@_attrs_define
class SuspendRun:
    """
    Attributes:
        fencing_token (int):
        reason (SuspensionReason):
        checkpoint (NewCheckpoint):
        interaction (NewInteraction | None | Unset):
    """

    fencing_token: int
    reason: SuspensionReason
    checkpoint: NewCheckpoint
    interaction: NewInteraction | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.new_interaction import NewInteraction

        fencing_token = self.fencing_token

        reason = self.reason.value

        checkpoint = self.checkpoint.to_dict()

        interaction: dict[str, Any] | None | Unset
        if isinstance(self.interaction, Unset):
            interaction = UNSET
        elif isinstance(self.interaction, NewInteraction):
            interaction = self.interaction.to_dict()
        else:
            interaction = self.interaction

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "fencing_token": fencing_token,
                "reason": reason,
                "checkpoint": checkpoint,
            }
        )
        if interaction is not UNSET:
            field_dict["interaction"] = interaction

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.new_checkpoint import NewCheckpoint
        from ..models.new_interaction import NewInteraction

        d = dict(src_dict)
        fencing_token = d.pop("fencing_token")

        reason = SuspensionReason(d.pop("reason"))

        checkpoint = NewCheckpoint.from_dict(d.pop("checkpoint"))

        def _parse_interaction(data: object) -> NewInteraction | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                interaction_type_1 = NewInteraction.from_dict(data)

                return interaction_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NewInteraction | None | Unset, data)

        interaction = _parse_interaction(d.pop("interaction", UNSET))

        suspend_run = cls(
            fencing_token=fencing_token,
            reason=reason,
            checkpoint=checkpoint,
            interaction=interaction,
        )

        return suspend_run
