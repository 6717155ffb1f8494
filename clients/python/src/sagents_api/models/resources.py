from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.network_mode import NetworkMode
from ..types import UNSET, Unset

T = TypeVar("T", bound="Resources")


@_attrs_define
class Resources:
    """
    Attributes:
        cpu_percent (int | None | Unset):
        memory_mb (int | None | Unset):
        max_processes (int | None | Unset):
        max_open_files (int | None | Unset):
        disk_mb (int | None | Unset): The sandbox's files may not grow past this; an exec is refused once they have.
        network (NetworkMode | None | Unset):
    """

    cpu_percent: int | None | Unset = UNSET
    memory_mb: int | None | Unset = UNSET
    max_processes: int | None | Unset = UNSET
    max_open_files: int | None | Unset = UNSET
    disk_mb: int | None | Unset = UNSET
    network: NetworkMode | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        cpu_percent: int | None | Unset
        if isinstance(self.cpu_percent, Unset):
            cpu_percent = UNSET
        else:
            cpu_percent = self.cpu_percent

        memory_mb: int | None | Unset
        if isinstance(self.memory_mb, Unset):
            memory_mb = UNSET
        else:
            memory_mb = self.memory_mb

        max_processes: int | None | Unset
        if isinstance(self.max_processes, Unset):
            max_processes = UNSET
        else:
            max_processes = self.max_processes

        max_open_files: int | None | Unset
        if isinstance(self.max_open_files, Unset):
            max_open_files = UNSET
        else:
            max_open_files = self.max_open_files

        disk_mb: int | None | Unset
        if isinstance(self.disk_mb, Unset):
            disk_mb = UNSET
        else:
            disk_mb = self.disk_mb

        network: None | str | Unset
        if isinstance(self.network, Unset):
            network = UNSET
        elif isinstance(self.network, NetworkMode):
            network = self.network.value
        else:
            network = self.network

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if cpu_percent is not UNSET:
            field_dict["cpu_percent"] = cpu_percent
        if memory_mb is not UNSET:
            field_dict["memory_mb"] = memory_mb
        if max_processes is not UNSET:
            field_dict["max_processes"] = max_processes
        if max_open_files is not UNSET:
            field_dict["max_open_files"] = max_open_files
        if disk_mb is not UNSET:
            field_dict["disk_mb"] = disk_mb
        if network is not UNSET:
            field_dict["network"] = network

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_cpu_percent(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        cpu_percent = _parse_cpu_percent(d.pop("cpu_percent", UNSET))

        def _parse_memory_mb(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        memory_mb = _parse_memory_mb(d.pop("memory_mb", UNSET))

        def _parse_max_processes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_processes = _parse_max_processes(d.pop("max_processes", UNSET))

        def _parse_max_open_files(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_open_files = _parse_max_open_files(d.pop("max_open_files", UNSET))

        def _parse_disk_mb(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        disk_mb = _parse_disk_mb(d.pop("disk_mb", UNSET))

        def _parse_network(data: object) -> NetworkMode | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                network_type_1 = NetworkMode(data)

                return network_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(NetworkMode | None | Unset, data)

        network = _parse_network(d.pop("network", UNSET))

        resources = cls(
            cpu_percent=cpu_percent,
            memory_mb=memory_mb,
            max_processes=max_processes,
            max_open_files=max_open_files,
            disk_mb=disk_mb,
            network=network,
        )

        return resources
