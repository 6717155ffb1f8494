from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.interaction_type import InteractionType
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.on_expiry_cancel import OnExpiryCancel
    from ..models.on_expiry_decide import OnExpiryDecide
    from ..models.on_expiry_fail import OnExpiryFail
    from ..models.pending_interaction_payload import PendingInteractionPayload


T = TypeVar("T", bound="PendingInteraction")


@_attrs_define
class PendingInteraction:
    """
    Attributes:
        id (str):
        run_id (str):
        interaction_type (InteractionType):
        allowed_decisions (list[str]):
        payload (PendingInteractionPayload):
        payload_sha256 (str): The payload's digest, for a reply to bind its answer to it (`payload_sha256`).
        revision (int):
        requested_at (datetime.datetime):
        on_expiry (OnExpiryCancel | OnExpiryDecide | OnExpiryFail): `OnExpiry` as sent and served: one shape per action,
            so a decision goes with `decide` only.
        expires_at (datetime.datetime | None | Unset):
    """

    id: str
    run_id: str
    interaction_type: InteractionType
    allowed_decisions: list[str]
    payload: PendingInteractionPayload
    payload_sha256: str
    revision: int
    requested_at: datetime.datetime
    on_expiry: OnExpiryCancel | OnExpiryDecide | OnExpiryFail
    expires_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_fail import OnExpiryFail

        id = self.id

        run_id = self.run_id

        interaction_type = self.interaction_type.value

        allowed_decisions = self.allowed_decisions

        payload = self.payload.to_dict()

        payload_sha256 = self.payload_sha256

        revision = self.revision

        requested_at = self.requested_at.isoformat()

        on_expiry: dict[str, Any]
        if isinstance(self.on_expiry, OnExpiryFail) or isinstance(
            self.on_expiry, OnExpiryCancel
        ):
            on_expiry = self.on_expiry.to_dict()
        else:
            on_expiry = self.on_expiry.to_dict()

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "run_id": run_id,
                "interaction_type": interaction_type,
                "allowed_decisions": allowed_decisions,
                "payload": payload,
                "payload_sha256": payload_sha256,
                "revision": revision,
                "requested_at": requested_at,
                "on_expiry": on_expiry,
            }
        )
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_decide import OnExpiryDecide
        from ..models.on_expiry_fail import OnExpiryFail
        from ..models.pending_interaction_payload import PendingInteractionPayload

        d = dict(src_dict)
        id = d.pop("id")

        run_id = d.pop("run_id")

        interaction_type = InteractionType(d.pop("interaction_type"))

        allowed_decisions = cast(list[str], d.pop("allowed_decisions"))

        payload = PendingInteractionPayload.from_dict(d.pop("payload"))

        payload_sha256 = d.pop("payload_sha256")

        revision = d.pop("revision")

        requested_at = datetime.datetime.fromisoformat(d.pop("requested_at"))

        def _parse_on_expiry(
            data: object,
        ) -> OnExpiryCancel | OnExpiryDecide | OnExpiryFail:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_on_expiry_on_expiry_fail = OnExpiryFail.from_dict(
                    data
                )

                return componentsschemas_on_expiry_on_expiry_fail
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_on_expiry_on_expiry_cancel = OnExpiryCancel.from_dict(
                    data
                )

                return componentsschemas_on_expiry_on_expiry_cancel
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_on_expiry_on_expiry_decide = OnExpiryDecide.from_dict(
                data
            )

            return componentsschemas_on_expiry_on_expiry_decide

        on_expiry = _parse_on_expiry(d.pop("on_expiry"))

        def _parse_expires_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expires_at = _parse_expires_at(d.pop("expires_at", UNSET))

        pending_interaction = cls(
            id=id,
            run_id=run_id,
            interaction_type=interaction_type,
            allowed_decisions=allowed_decisions,
            payload=payload,
            payload_sha256=payload_sha256,
            revision=revision,
            requested_at=requested_at,
            on_expiry=on_expiry,
            expires_at=expires_at,
        )

        pending_interaction.additional_properties = d
        return pending_interaction

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
