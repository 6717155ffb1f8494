from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.release_disposition import ReleaseDisposition
from ..types import UNSET, Unset

T = TypeVar("T", bound="LifecyclePolicy")


@_attrs_define
class LifecyclePolicy:
    """
    Attributes:
        safe_pause_behavior (None | ReleaseDisposition | Unset):
        unsafe_pause_behavior (None | ReleaseDisposition | Unset):
        max_lifetime_seconds (int | None | Unset):
    """

    safe_pause_behavior: None | ReleaseDisposition | Unset = UNSET
    unsafe_pause_behavior: None | ReleaseDisposition | Unset = UNSET
    max_lifetime_seconds: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        safe_pause_behavior: None | str | Unset
        if isinstance(self.safe_pause_behavior, Unset):
            safe_pause_behavior = UNSET
        elif isinstance(self.safe_pause_behavior, ReleaseDisposition):
            safe_pause_behavior = self.safe_pause_behavior.value
        else:
            safe_pause_behavior = self.safe_pause_behavior

        unsafe_pause_behavior: None | str | Unset
        if isinstance(self.unsafe_pause_behavior, Unset):
            unsafe_pause_behavior = UNSET
        elif isinstance(self.unsafe_pause_behavior, ReleaseDisposition):
            unsafe_pause_behavior = self.unsafe_pause_behavior.value
        else:
            unsafe_pause_behavior = self.unsafe_pause_behavior

        max_lifetime_seconds: int | None | Unset
        if isinstance(self.max_lifetime_seconds, Unset):
            max_lifetime_seconds = UNSET
        else:
            max_lifetime_seconds = self.max_lifetime_seconds

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if safe_pause_behavior is not UNSET:
            field_dict["safe_pause_behavior"] = safe_pause_behavior
        if unsafe_pause_behavior is not UNSET:
            field_dict["unsafe_pause_behavior"] = unsafe_pause_behavior
        if max_lifetime_seconds is not UNSET:
            field_dict["max_lifetime_seconds"] = max_lifetime_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_safe_pause_behavior(
            data: object,
        ) -> None | ReleaseDisposition | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                safe_pause_behavior_type_1 = ReleaseDisposition(data)

                return safe_pause_behavior_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReleaseDisposition | Unset, data)

        safe_pause_behavior = _parse_safe_pause_behavior(
            d.pop("safe_pause_behavior", UNSET)
        )

        def _parse_unsafe_pause_behavior(
            data: object,
        ) -> None | ReleaseDisposition | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                unsafe_pause_behavior_type_1 = ReleaseDisposition(data)

                return unsafe_pause_behavior_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReleaseDisposition | Unset, data)

        unsafe_pause_behavior = _parse_unsafe_pause_behavior(
            d.pop("unsafe_pause_behavior", UNSET)
        )

        def _parse_max_lifetime_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_lifetime_seconds = _parse_max_lifetime_seconds(
            d.pop("max_lifetime_seconds", UNSET)
        )

        lifecycle_policy = cls(
            safe_pause_behavior=safe_pause_behavior,
            unsafe_pause_behavior=unsafe_pause_behavior,
            max_lifetime_seconds=max_lifetime_seconds,
        )

        return lifecycle_policy
