from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.complete_run_output import CompleteRunOutput


T = TypeVar("T", bound="CompleteRun")


@_attrs_define
class CompleteRun:
    """
    Attributes:
        fencing_token (int):
        output (CompleteRunOutput | Unset):
    """

    fencing_token: int
    output: CompleteRunOutput | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        fencing_token = self.fencing_token

        output: dict[str, Any] | Unset = UNSET
        if not isinstance(self.output, Unset):
            output = self.output.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "fencing_token": fencing_token,
            }
        )
        if output is not UNSET:
            field_dict["output"] = output

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.complete_run_output import CompleteRunOutput

        d = dict(src_dict)
        fencing_token = d.pop("fencing_token")

        _output = d.pop("output", UNSET)
        output: CompleteRunOutput | Unset
        if isinstance(_output, Unset):
            output = UNSET
        else:
            output = CompleteRunOutput.from_dict(_output)

        complete_run = cls(
            fencing_token=fencing_token,
            output=output,
        )

        return complete_run
