from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.spec_version import SpecVersion
from ..models.workspace_mode import WorkspaceMode
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.lifecycle_policy import LifecyclePolicy
    from ..models.resolved_sandbox_spec_metadata import ResolvedSandboxSpecMetadata
    from ..models.resources import Resources


T = TypeVar("T", bound="ResolvedSandboxSpec")


@_attrs_define
class ResolvedSandboxSpec:
    """
    Attributes:
        spec_version (SpecVersion): The one spec version accepted (another is `422 sandbox.spec_unsupported`).
        provider_id (str):
        spec_hash (str):
        policy_hash (str):
        workspace_mode (WorkspaceMode):
        host_workspace (None | str | Unset):
        lifecycle (LifecyclePolicy | Unset):
        resources (Resources | Unset):
        metadata (ResolvedSandboxSpecMetadata | Unset):
    """

    spec_version: SpecVersion
    provider_id: str
    spec_hash: str
    policy_hash: str
    workspace_mode: WorkspaceMode
    host_workspace: None | str | Unset = UNSET
    lifecycle: LifecyclePolicy | Unset = UNSET
    resources: Resources | Unset = UNSET
    metadata: ResolvedSandboxSpecMetadata | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        spec_version = self.spec_version.value

        provider_id = self.provider_id

        spec_hash = self.spec_hash

        policy_hash = self.policy_hash

        workspace_mode = self.workspace_mode.value

        host_workspace: None | str | Unset
        if isinstance(self.host_workspace, Unset):
            host_workspace = UNSET
        else:
            host_workspace = self.host_workspace

        lifecycle: dict[str, Any] | Unset = UNSET
        if not isinstance(self.lifecycle, Unset):
            lifecycle = self.lifecycle.to_dict()

        resources: dict[str, Any] | Unset = UNSET
        if not isinstance(self.resources, Unset):
            resources = self.resources.to_dict()

        metadata: dict[str, Any] | Unset = UNSET
        if not isinstance(self.metadata, Unset):
            metadata = self.metadata.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "spec_version": spec_version,
                "provider_id": provider_id,
                "spec_hash": spec_hash,
                "policy_hash": policy_hash,
                "workspace_mode": workspace_mode,
            }
        )
        if host_workspace is not UNSET:
            field_dict["host_workspace"] = host_workspace
        if lifecycle is not UNSET:
            field_dict["lifecycle"] = lifecycle
        if resources is not UNSET:
            field_dict["resources"] = resources
        if metadata is not UNSET:
            field_dict["metadata"] = metadata

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.lifecycle_policy import LifecyclePolicy
        from ..models.resolved_sandbox_spec_metadata import ResolvedSandboxSpecMetadata
        from ..models.resources import Resources

        d = dict(src_dict)
        spec_version = SpecVersion(d.pop("spec_version"))

        provider_id = d.pop("provider_id")

        spec_hash = d.pop("spec_hash")

        policy_hash = d.pop("policy_hash")

        workspace_mode = WorkspaceMode(d.pop("workspace_mode"))

        def _parse_host_workspace(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        host_workspace = _parse_host_workspace(d.pop("host_workspace", UNSET))

        _lifecycle = d.pop("lifecycle", UNSET)
        lifecycle: LifecyclePolicy | Unset
        if isinstance(_lifecycle, Unset):
            lifecycle = UNSET
        else:
            lifecycle = LifecyclePolicy.from_dict(_lifecycle)

        _resources = d.pop("resources", UNSET)
        resources: Resources | Unset
        if isinstance(_resources, Unset):
            resources = UNSET
        else:
            resources = Resources.from_dict(_resources)

        _metadata = d.pop("metadata", UNSET)
        metadata: ResolvedSandboxSpecMetadata | Unset
        if isinstance(_metadata, Unset):
            metadata = UNSET
        else:
            metadata = ResolvedSandboxSpecMetadata.from_dict(_metadata)

        resolved_sandbox_spec = cls(
            spec_version=spec_version,
            provider_id=provider_id,
            spec_hash=spec_hash,
            policy_hash=policy_hash,
            workspace_mode=workspace_mode,
            host_workspace=host_workspace,
            lifecycle=lifecycle,
            resources=resources,
            metadata=metadata,
        )

        return resolved_sandbox_spec
