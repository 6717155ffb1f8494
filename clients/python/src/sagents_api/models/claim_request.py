from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ClaimRequest")


@_attrs_define
class ClaimRequest:
    """
    Attributes:
        worker_id (str):
        max_ (int | None | Unset): How many runs to claim at most (1 to 100, default 1).
        wait_seconds (int | None | Unset): Long-poll: wait up to this many seconds for work (at most the configured
            limit).
    """

    worker_id: str
    max_: int | None | Unset = UNSET
    wait_seconds: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        worker_id = self.worker_id

        max_: int | None | Unset
        if isinstance(self.max_, Unset):
            max_ = UNSET
        else:
            max_ = self.max_

        wait_seconds: int | None | Unset
        if isinstance(self.wait_seconds, Unset):
            wait_seconds = UNSET
        else:
            wait_seconds = self.wait_seconds

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "worker_id": worker_id,
            }
        )
        if max_ is not UNSET:
            field_dict["max"] = max_
        if wait_seconds is not UNSET:
            field_dict["wait_seconds"] = wait_seconds

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        worker_id = d.pop("worker_id")

        def _parse_max_(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_ = _parse_max_(d.pop("max", UNSET))

        def _parse_wait_seconds(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        wait_seconds = _parse_wait_seconds(d.pop("wait_seconds", UNSET))

        claim_request = cls(
            worker_id=worker_id,
            max_=max_,
            wait_seconds=wait_seconds,
        )

        return claim_request
