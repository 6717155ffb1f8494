from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="Heartbeat")


@_attrs_define
class Heartbeat:
    """
    Attributes:
        fencing_token (int):
    """

    fencing_token: int

    def to_dict(self) -> dict[str, Any]:
        fencing_token = self.fencing_token

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "fencing_token": fencing_token,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        fencing_token = d.pop("fencing_token")

        heartbeat = cls(
            fencing_token=fencing_token,
        )

        return heartbeat
