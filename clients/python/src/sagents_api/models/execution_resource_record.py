from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.release_disposition import ReleaseDisposition
from ..models.release_purpose import ReleasePurpose
from ..models.resource_state import ResourceState
from ..models.suspension_reason import SuspensionReason
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.checkpoint_ref import CheckpointRef
    from ..models.provider_error import ProviderError
    from ..models.resolved_sandbox_spec import ResolvedSandboxSpec
    from ..models.sandbox_ref import SandboxRef


T = TypeVar("T", bound="ExecutionResourceRecord")


@_attrs_define
class ExecutionResourceRecord:
    """
    Attributes:
        run_id (str):
        generation (int): 0 before the first bind, 1 at first bind, +1 on every attach, restore or re-provision.
        provider_id (str):
        sandbox_spec (ResolvedSandboxSpec):
        run_resolved_spec_hash (str):
        state (ResourceState): Where a run's compute stands. Never shown to a frontend.
        checkpoint_lost (bool): A terminal provider error destroyed the sandbox checkpoint; resume fails with
            `sandbox.snapshot_lost`.
        blocking_job_ids (list[str]):
        blocking_child_run_ids (list[str]):
        compute_released (bool):
        retry_count (int):
        version (int): Compare-and-set version, bumped by every write.
        updated_at (datetime.datetime):
        provider_generation (int | None | Unset): The provider's own generation of the compute; grants name it.
        sandbox_ref (None | SandboxRef | Unset):
        disposition (None | ReleaseDisposition | Unset):
        sandbox_checkpoint (CheckpointRef | None | Unset):
        suspension_id (None | str | Unset):
        suspension_reason (None | SuspensionReason | Unset):
        release_idempotency_key (None | str | Unset):
        release_purpose (None | ReleasePurpose | Unset):
        release_requested_at (datetime.datetime | None | Unset):
        released_at (datetime.datetime | None | Unset):
        bind_idempotency_key (None | str | Unset): Key of the provision or restore under way; set before the provider is
            called, so a
            run that ends meanwhile knows compute may exist.
        next_retry_at (datetime.datetime | None | Unset):
        due_at (datetime.datetime | None | Unset): When the coordinator should next look at this record (`None`: nothing
            to do).
        error (None | ProviderError | Unset):
    """

    run_id: str
    generation: int
    provider_id: str
    sandbox_spec: ResolvedSandboxSpec
    run_resolved_spec_hash: str
    state: ResourceState
    checkpoint_lost: bool
    blocking_job_ids: list[str]
    blocking_child_run_ids: list[str]
    compute_released: bool
    retry_count: int
    version: int
    updated_at: datetime.datetime
    provider_generation: int | None | Unset = UNSET
    sandbox_ref: None | SandboxRef | Unset = UNSET
    disposition: None | ReleaseDisposition | Unset = UNSET
    sandbox_checkpoint: CheckpointRef | None | Unset = UNSET
    suspension_id: None | str | Unset = UNSET
    suspension_reason: None | SuspensionReason | Unset = UNSET
    release_idempotency_key: None | str | Unset = UNSET
    release_purpose: None | ReleasePurpose | Unset = UNSET
    release_requested_at: datetime.datetime | None | Unset = UNSET
    released_at: datetime.datetime | None | Unset = UNSET
    bind_idempotency_key: None | str | Unset = UNSET
    next_retry_at: datetime.datetime | None | Unset = UNSET
    due_at: datetime.datetime | None | Unset = UNSET
    error: None | ProviderError | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.checkpoint_ref import CheckpointRef
        from ..models.provider_error import ProviderError
        from ..models.sandbox_ref import SandboxRef

        run_id = self.run_id

        generation = self.generation

        provider_id = self.provider_id

        sandbox_spec = self.sandbox_spec.to_dict()

        run_resolved_spec_hash = self.run_resolved_spec_hash

        state = self.state.value

        checkpoint_lost = self.checkpoint_lost

        blocking_job_ids = self.blocking_job_ids

        blocking_child_run_ids = self.blocking_child_run_ids

        compute_released = self.compute_released

        retry_count = self.retry_count

        version = self.version

        updated_at = self.updated_at.isoformat()

        provider_generation: int | None | Unset
        if isinstance(self.provider_generation, Unset):
            provider_generation = UNSET
        else:
            provider_generation = self.provider_generation

        sandbox_ref: dict[str, Any] | None | Unset
        if isinstance(self.sandbox_ref, Unset):
            sandbox_ref = UNSET
        elif isinstance(self.sandbox_ref, SandboxRef):
            sandbox_ref = self.sandbox_ref.to_dict()
        else:
            sandbox_ref = self.sandbox_ref

        disposition: None | str | Unset
        if isinstance(self.disposition, Unset):
            disposition = UNSET
        elif isinstance(self.disposition, ReleaseDisposition):
            disposition = self.disposition.value
        else:
            disposition = self.disposition

        sandbox_checkpoint: dict[str, Any] | None | Unset
        if isinstance(self.sandbox_checkpoint, Unset):
            sandbox_checkpoint = UNSET
        elif isinstance(self.sandbox_checkpoint, CheckpointRef):
            sandbox_checkpoint = self.sandbox_checkpoint.to_dict()
        else:
            sandbox_checkpoint = self.sandbox_checkpoint

        suspension_id: None | str | Unset
        if isinstance(self.suspension_id, Unset):
            suspension_id = UNSET
        else:
            suspension_id = self.suspension_id

        suspension_reason: None | str | Unset
        if isinstance(self.suspension_reason, Unset):
            suspension_reason = UNSET
        elif isinstance(self.suspension_reason, SuspensionReason):
            suspension_reason = self.suspension_reason.value
        else:
            suspension_reason = self.suspension_reason

        release_idempotency_key: None | str | Unset
        if isinstance(self.release_idempotency_key, Unset):
            release_idempotency_key = UNSET
        else:
            release_idempotency_key = self.release_idempotency_key

        release_purpose: None | str | Unset
        if isinstance(self.release_purpose, Unset):
            release_purpose = UNSET
        elif isinstance(self.release_purpose, ReleasePurpose):
            release_purpose = self.release_purpose.value
        else:
            release_purpose = self.release_purpose

        release_requested_at: None | str | Unset
        if isinstance(self.release_requested_at, Unset):
            release_requested_at = UNSET
        elif isinstance(self.release_requested_at, datetime.datetime):
            release_requested_at = self.release_requested_at.isoformat()
        else:
            release_requested_at = self.release_requested_at

        released_at: None | str | Unset
        if isinstance(self.released_at, Unset):
            released_at = UNSET
        elif isinstance(self.released_at, datetime.datetime):
            released_at = self.released_at.isoformat()
        else:
            released_at = self.released_at

        bind_idempotency_key: None | str | Unset
        if isinstance(self.bind_idempotency_key, Unset):
            bind_idempotency_key = UNSET
        else:
            bind_idempotency_key = self.bind_idempotency_key

        next_retry_at: None | str | Unset
        if isinstance(self.next_retry_at, Unset):
            next_retry_at = UNSET
        elif isinstance(self.next_retry_at, datetime.datetime):
            next_retry_at = self.next_retry_at.isoformat()
        else:
            next_retry_at = self.next_retry_at

        due_at: None | str | Unset
        if isinstance(self.due_at, Unset):
            due_at = UNSET
        elif isinstance(self.due_at, datetime.datetime):
            due_at = self.due_at.isoformat()
        else:
            due_at = self.due_at

        error: dict[str, Any] | None | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        elif isinstance(self.error, ProviderError):
            error = self.error.to_dict()
        else:
            error = self.error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run_id": run_id,
                "generation": generation,
                "provider_id": provider_id,
                "sandbox_spec": sandbox_spec,
                "run_resolved_spec_hash": run_resolved_spec_hash,
                "state": state,
                "checkpoint_lost": checkpoint_lost,
                "blocking_job_ids": blocking_job_ids,
                "blocking_child_run_ids": blocking_child_run_ids,
                "compute_released": compute_released,
                "retry_count": retry_count,
                "version": version,
                "updated_at": updated_at,
            }
        )
        if provider_generation is not UNSET:
            field_dict["provider_generation"] = provider_generation
        if sandbox_ref is not UNSET:
            field_dict["sandbox_ref"] = sandbox_ref
        if disposition is not UNSET:
            field_dict["disposition"] = disposition
        if sandbox_checkpoint is not UNSET:
            field_dict["sandbox_checkpoint"] = sandbox_checkpoint
        if suspension_id is not UNSET:
            field_dict["suspension_id"] = suspension_id
        if suspension_reason is not UNSET:
            field_dict["suspension_reason"] = suspension_reason
        if release_idempotency_key is not UNSET:
            field_dict["release_idempotency_key"] = release_idempotency_key
        if release_purpose is not UNSET:
            field_dict["release_purpose"] = release_purpose
        if release_requested_at is not UNSET:
            field_dict["release_requested_at"] = release_requested_at
        if released_at is not UNSET:
            field_dict["released_at"] = released_at
        if bind_idempotency_key is not UNSET:
            field_dict["bind_idempotency_key"] = bind_idempotency_key
        if next_retry_at is not UNSET:
            field_dict["next_retry_at"] = next_retry_at
        if due_at is not UNSET:
            field_dict["due_at"] = due_at
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.checkpoint_ref import CheckpointRef
        from ..models.provider_error import ProviderError
        from ..models.resolved_sandbox_spec import ResolvedSandboxSpec
        from ..models.sandbox_ref import SandboxRef

        d = dict(src_dict)
        run_id = d.pop("run_id")

        generation = d.pop("generation")

        provider_id = d.pop("provider_id")

        sandbox_spec = ResolvedSandboxSpec.from_dict(d.pop("sandbox_spec"))

        run_resolved_spec_hash = d.pop("run_resolved_spec_hash")

        state = ResourceState(d.pop("state"))

        checkpoint_lost = d.pop("checkpoint_lost")

        blocking_job_ids = cast(list[str], d.pop("blocking_job_ids"))

        blocking_child_run_ids = cast(list[str], d.pop("blocking_child_run_ids"))

        compute_released = d.pop("compute_released")

        retry_count = d.pop("retry_count")

        version = d.pop("version")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_provider_generation(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        provider_generation = _parse_provider_generation(
            d.pop("provider_generation", UNSET)
        )

        def _parse_sandbox_ref(data: object) -> None | SandboxRef | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                sandbox_ref_type_1 = SandboxRef.from_dict(data)

                return sandbox_ref_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SandboxRef | Unset, data)

        sandbox_ref = _parse_sandbox_ref(d.pop("sandbox_ref", UNSET))

        def _parse_disposition(data: object) -> None | ReleaseDisposition | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                disposition_type_1 = ReleaseDisposition(data)

                return disposition_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReleaseDisposition | Unset, data)

        disposition = _parse_disposition(d.pop("disposition", UNSET))

        def _parse_sandbox_checkpoint(data: object) -> CheckpointRef | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                sandbox_checkpoint_type_1 = CheckpointRef.from_dict(data)

                return sandbox_checkpoint_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CheckpointRef | None | Unset, data)

        sandbox_checkpoint = _parse_sandbox_checkpoint(
            d.pop("sandbox_checkpoint", UNSET)
        )

        def _parse_suspension_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        suspension_id = _parse_suspension_id(d.pop("suspension_id", UNSET))

        def _parse_suspension_reason(data: object) -> None | SuspensionReason | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                suspension_reason_type_1 = SuspensionReason(data)

                return suspension_reason_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SuspensionReason | Unset, data)

        suspension_reason = _parse_suspension_reason(d.pop("suspension_reason", UNSET))

        def _parse_release_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        release_idempotency_key = _parse_release_idempotency_key(
            d.pop("release_idempotency_key", UNSET)
        )

        def _parse_release_purpose(data: object) -> None | ReleasePurpose | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                release_purpose_type_1 = ReleasePurpose(data)

                return release_purpose_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReleasePurpose | Unset, data)

        release_purpose = _parse_release_purpose(d.pop("release_purpose", UNSET))

        def _parse_release_requested_at(
            data: object,
        ) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                release_requested_at_type_0 = datetime.datetime.fromisoformat(data)

                return release_requested_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        release_requested_at = _parse_release_requested_at(
            d.pop("release_requested_at", UNSET)
        )

        def _parse_released_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                released_at_type_0 = datetime.datetime.fromisoformat(data)

                return released_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        released_at = _parse_released_at(d.pop("released_at", UNSET))

        def _parse_bind_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        bind_idempotency_key = _parse_bind_idempotency_key(
            d.pop("bind_idempotency_key", UNSET)
        )

        def _parse_next_retry_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_retry_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_retry_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_retry_at = _parse_next_retry_at(d.pop("next_retry_at", UNSET))

        def _parse_due_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                due_at_type_0 = datetime.datetime.fromisoformat(data)

                return due_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        due_at = _parse_due_at(d.pop("due_at", UNSET))

        def _parse_error(data: object) -> None | ProviderError | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                error_type_1 = ProviderError.from_dict(data)

                return error_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ProviderError | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        execution_resource_record = cls(
            run_id=run_id,
            generation=generation,
            provider_id=provider_id,
            sandbox_spec=sandbox_spec,
            run_resolved_spec_hash=run_resolved_spec_hash,
            state=state,
            checkpoint_lost=checkpoint_lost,
            blocking_job_ids=blocking_job_ids,
            blocking_child_run_ids=blocking_child_run_ids,
            compute_released=compute_released,
            retry_count=retry_count,
            version=version,
            updated_at=updated_at,
            provider_generation=provider_generation,
            sandbox_ref=sandbox_ref,
            disposition=disposition,
            sandbox_checkpoint=sandbox_checkpoint,
            suspension_id=suspension_id,
            suspension_reason=suspension_reason,
            release_idempotency_key=release_idempotency_key,
            release_purpose=release_purpose,
            release_requested_at=release_requested_at,
            released_at=released_at,
            bind_idempotency_key=bind_idempotency_key,
            next_retry_at=next_retry_at,
            due_at=due_at,
            error=error,
        )

        execution_resource_record.additional_properties = d
        return execution_resource_record

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
