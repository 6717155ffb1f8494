from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.on_expiry_cancel import OnExpiryCancel
    from ..models.on_expiry_decide import OnExpiryDecide
    from ..models.on_expiry_fail import OnExpiryFail


T = TypeVar("T", bound="ExpiryDefault")


@_attrs_define
class ExpiryDefault:
    """The deadline a tenant's interactions get when they name neither a deadline nor a policy.

    Attributes:
        expires_in_seconds (int):
        warn_before_seconds (int | None | Unset):
        on_expiry (None | OnExpiryCancel | OnExpiryDecide | OnExpiryFail | Unset):
    """

    expires_in_seconds: int
    warn_before_seconds: int | None | Unset = UNSET
    on_expiry: None | OnExpiryCancel | OnExpiryDecide | OnExpiryFail | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_decide import OnExpiryDecide
        from ..models.on_expiry_fail import OnExpiryFail

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
                "expires_in_seconds": expires_in_seconds,
            }
        )
        if warn_before_seconds is not UNSET:
            field_dict["warn_before_seconds"] = warn_before_seconds
        if on_expiry is not UNSET:
            field_dict["on_expiry"] = on_expiry

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.on_expiry_cancel import OnExpiryCancel
        from ..models.on_expiry_decide import OnExpiryDecide
        from ..models.on_expiry_fail import OnExpiryFail

        d = dict(src_dict)
        expires_in_seconds = d.pop("expires_in_seconds")

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

        expiry_default = cls(
            expires_in_seconds=expires_in_seconds,
            warn_before_seconds=warn_before_seconds,
            on_expiry=on_expiry,
        )

        return expiry_default
