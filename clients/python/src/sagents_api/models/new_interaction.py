from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.interaction_type import InteractionType
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.new_interaction_payload import NewInteractionPayload
    from ..models.on_expiry_cancel import OnExpiryCancel
    from ..models.on_expiry_decide import OnExpiryDecide
    from ..models.on_expiry_fail import OnExpiryFail


T = TypeVar("T", bound="NewInteraction")


@_attrs_define
class NewInteraction:
    """
    Attributes:
        interaction_type (InteractionType):
        allowed_decisions (list[str]):
        payload (NewInteractionPayload | Unset):
        expires_at (datetime.datetime | None | Unset): The deadline; or give `expires_in_seconds` instead.
        expires_in_seconds (int | None | Unset): The deadline, counted from the suspension's commit.
        warn_before_seconds (int | None | Unset): Announces the deadline this long before it (`interaction.expiring`,
            once).
        on_expiry (None | OnExpiryCancel | OnExpiryDecide | OnExpiryFail | Unset):
    """

    interaction_type: InteractionType
    allowed_decisions: list[str]
    payload: NewInteractionPayload | Unset = UNSET
    expires_at: datetime.datetime | None | Unset = UNSET
    expires_in_seconds: int | None | Unset = UNSET
    warn_before_seconds: int | None | Unset = UNSET
    on_expiry: None | OnExpiryCancel | OnExpiryDecide | OnExpiryFail | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_decide import OnExpiryDecide
        from ..models.on_expiry_fail import OnExpiryFail

        interaction_type = self.interaction_type.value

        allowed_decisions = self.allowed_decisions

        payload: dict[str, Any] | Unset = UNSET
        if not isinstance(self.payload, Unset):
            payload = self.payload.to_dict()

        expires_at: None | str | Unset
        if isinstance(self.expires_at, Unset):
            expires_at = UNSET
        elif isinstance(self.expires_at, datetime.datetime):
            expires_at = self.expires_at.isoformat()
        else:
            expires_at = self.expires_at

        expires_in_seconds: int | None | Unset
        if isinstance(self.expires_in_seconds, Unset):
            expires_in_seconds = UNSET
        else:
            expires_in_seconds = self.expires_in_seconds

        warn_before_seconds: int | None | Unset
        if isinstance(self.warn_before_seconds, Unset):
            warn_before_seconds = UNSET
        else:
            warn_before_seconds = self.warn_before_seconds

        on_expiry: dict[str, Any] | None | Unset
        if isinstance(self.on_expiry, Unset):
            on_expiry = UNSET
        elif (
            isinstance(self.on_expiry, OnExpiryFail)
            or isinstance(self.on_expiry, OnExpiryCancel)
            or isinstance(self.on_expiry, OnExpiryDecide)
        ):
            on_expiry = self.on_expiry.to_dict()
        else:
            on_expiry = self.on_expiry

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "interaction_type": interaction_type,
                "allowed_decisions": allowed_decisions,
            }
        )
        if payload is not UNSET:
            field_dict["payload"] = payload
        if expires_at is not UNSET:
            field_dict["expires_at"] = expires_at
        if expires_in_seconds is not UNSET:
            field_dict["expires_in_seconds"] = expires_in_seconds
        if warn_before_seconds is not UNSET:
            field_dict["warn_before_seconds"] = warn_before_seconds
        if on_expiry is not UNSET:
            field_dict["on_expiry"] = on_expiry

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.new_interaction_payload import NewInteractionPayload
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_decide import OnExpiryDecide
        from ..models.on_expiry_fail import OnExpiryFail

        d = dict(src_dict)
        interaction_type = InteractionType(d.pop("interaction_type"))

        allowed_decisions = cast(list[str], d.pop("allowed_decisions"))

        _payload = d.pop("payload", UNSET)
        payload: NewInteractionPayload | Unset
        if isinstance(_payload, Unset):
            payload = UNSET
        else:
            payload = NewInteractionPayload.from_dict(_payload)

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

        def _parse_expires_in_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        expires_in_seconds = _parse_expires_in_seconds(
            d.pop("expires_in_seconds", UNSET)
        )

        def _parse_warn_before_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        warn_before_seconds = _parse_warn_before_seconds(
            d.pop("warn_before_seconds", UNSET)
        )

        def _parse_on_expiry(
            data: object,
        ) -> None | OnExpiryCancel | OnExpiryDecide | OnExpiryFail | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
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
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_on_expiry_on_expiry_decide = OnExpiryDecide.from_dict(
                    data
                )

                return componentsschemas_on_expiry_on_expiry_decide
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                None | OnExpiryCancel | OnExpiryDecide | OnExpiryFail | Unset, data
            )

        on_expiry = _parse_on_expiry(d.pop("on_expiry", UNSET))

        new_interaction = cls(
            interaction_type=interaction_type,
            allowed_decisions=allowed_decisions,
            payload=payload,
            expires_at=expires_at,
            expires_in_seconds=expires_in_seconds,
            warn_before_seconds=warn_before_seconds,
            on_expiry=on_expiry,
        )

        return new_interaction
