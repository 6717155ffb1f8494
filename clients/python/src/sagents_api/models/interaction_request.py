from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.interaction_status import InteractionStatus
from ..models.interaction_type import InteractionType
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.interaction_request_payload import InteractionRequestPayload
    from ..models.on_expiry_cancel import OnExpiryCancel
    from ..models.on_expiry_decide import OnExpiryDecide
    from ..models.on_expiry_fail import OnExpiryFail
    from ..models.resolution import Resolution


T = TypeVar("T", bound="InteractionRequest")


@_attrs_define
class InteractionRequest:
    """
    Attributes:
        id (str):
        run_id (str):
        interaction_type (InteractionType):
        status (InteractionStatus):
        allowed_decisions (list[str]):
        payload (InteractionRequestPayload):
        payload_sha256 (str): `payload_digest(payload)`: a reply may send it back to bind its answer to this payload.
        revision (int):
        requested_at (datetime.datetime):
        on_expiry (OnExpiryCancel | OnExpiryDecide | OnExpiryFail): `OnExpiry` as sent and served: one shape per action,
            so a decision goes with `decide` only.
        expires_at (datetime.datetime | None | Unset):
        resolution (None | Resolution | Unset):
    """

    id: str
    run_id: str
    interaction_type: InteractionType
    status: InteractionStatus
    allowed_decisions: list[str]
    payload: InteractionRequestPayload
    payload_sha256: str
    revision: int
    requested_at: datetime.datetime
    on_expiry: OnExpiryCancel | OnExpiryDecide | OnExpiryFail
    expires_at: datetime.datetime | None | Unset = UNSET
    resolution: None | Resolution | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_fail import OnExpiryFail
        from ..models.resolution import Resolution

        id = self.id

        run_id = self.run_id

        interaction_type = self.interaction_type.value

        status = self.status.value

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

        resolution: dict[str, Any] | None | Unset
        if isinstance(self.resolution, Unset):
            resolution = UNSET
        elif isinstance(self.resolution, Resolution):
            resolution = self.resolution.to_dict()
        else:
            resolution = self.resolution

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "run_id": run_id,
                "interaction_type": interaction_type,
                "status": status,
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
        if resolution is not UNSET:
            field_dict["resolution"] = resolution

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.interaction_request_payload import InteractionRequestPayload
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_decide import OnExpiryDecide
        from ..models.on_expiry_fail import OnExpiryFail
        from ..models.resolution import Resolution

        d = dict(src_dict)
        id = d.pop("id")

        run_id = d.pop("run_id")

        interaction_type = InteractionType(d.pop("interaction_type"))

        status = InteractionStatus(d.pop("status"))

        allowed_decisions = cast(list[str], d.pop("allowed_decisions"))

        payload = InteractionRequestPayload.from_dict(d.pop("payload"))

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

        def _parse_resolution(data: object) -> None | Resolution | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                resolution_type_1 = Resolution.from_dict(data)

                return resolution_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Resolution | Unset, data)

        resolution = _parse_resolution(d.pop("resolution", UNSET))

        interaction_request = cls(
            id=id,
            run_id=run_id,
            interaction_type=interaction_type,
            status=status,
            allowed_decisions=allowed_decisions,
            payload=payload,
            payload_sha256=payload_sha256,
            revision=revision,
            requested_at=requested_at,
            on_expiry=on_expiry,
            expires_at=expires_at,
            resolution=resolution,
        )

        interaction_request.additional_properties = d
        return interaction_request

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
