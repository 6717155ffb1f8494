from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.lease_holder import LeaseHolder
    from ..models.run import Run


T = TypeVar("T", bound="RunReadBack")


@_attrs_define
class RunReadBack:
    """`GET /v1/runs/{run_id}`: what a runtime that lost an answer needs to know where it stands.

    Attributes:
        run (Run): A run as the runtime API returns it.
        lease (LeaseHolder | None | Unset):
        latest_suspension_id (None | str | Unset):
    """

    run: Run
    lease: LeaseHolder | None | Unset = UNSET
    latest_suspension_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.lease_holder import LeaseHolder

        run = self.run.to_dict()

        lease: dict[str, Any] | None | Unset
        if isinstance(self.lease, Unset):
            lease = UNSET
        elif isinstance(self.lease, LeaseHolder):
            lease = self.lease.to_dict()
        else:
            lease = self.lease

        latest_suspension_id: None | str | Unset
        if isinstance(self.latest_suspension_id, Unset):
            latest_suspension_id = UNSET
        else:
            latest_suspension_id = self.latest_suspension_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run": run,
            }
        )
        if lease is not UNSET:
            field_dict["lease"] = lease
        if latest_suspension_id is not UNSET:
            field_dict["latest_suspension_id"] = latest_suspension_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.lease_holder import LeaseHolder
        from ..models.run import Run

        d = dict(src_dict)
        run = Run.from_dict(d.pop("run"))

        def _parse_lease(data: object) -> LeaseHolder | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                lease_type_1 = LeaseHolder.from_dict(data)

                return lease_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(LeaseHolder | None | Unset, data)

        lease = _parse_lease(d.pop("lease", UNSET))

        def _parse_latest_suspension_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        latest_suspension_id = _parse_latest_suspension_id(
            d.pop("latest_suspension_id", UNSET)
        )

        run_read_back = cls(
            run=run,
            lease=lease,
            latest_suspension_id=latest_suspension_id,
        )

        run_read_back.additional_properties = d
        return run_read_back

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
