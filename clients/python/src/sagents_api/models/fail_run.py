from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

if TYPE_CHECKING:
    from ..models.fail_run_error import FailRunError


T = TypeVar("T", bound="FailRun")


@_attrs_define
class FailRun:
    """
    Attributes:
        fencing_token (int):
        error (FailRunError):
    """

    fencing_token: int
    error: FailRunError

    def to_dict(self) -> dict[str, Any]:
        fencing_token = self.fencing_token

        error = self.error.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "fencing_token": fencing_token,
                "error": error,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.fail_run_error import FailRunError

        d = dict(src_dict)
        fencing_token = d.pop("fencing_token")

        error = FailRunError.from_dict(d.pop("error"))

        fail_run = cls(
            fencing_token=fencing_token,
            error=error,
        )

        return fail_run
