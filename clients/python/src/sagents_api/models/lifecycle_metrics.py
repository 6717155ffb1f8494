from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.lifecycle_metrics_records_by_state import (
        LifecycleMetricsRecordsByState,
    )


T = TypeVar("T", bound="LifecycleMetrics")


@_attrs_define
class LifecycleMetrics:
    """The operator's view of the lifecycle (never changes anything a user sees).

    Attributes:
        active_sandboxes (int): Records `active`.
        retained_sandboxes (int): Records `release_blocked`.
        pending_releases (int): `release_blocked` + `release_requested` + `release_failed` + `needs_attention`.
        release_failure_count (int): Records `release_failed`.
        release_retry_count (int): Failed release attempts: those of every confirmed release, and the retries of the
            releases still pending (`release_requested`, `release_failed`, `needs_attention`).
        bind_retry_count (int): Retries of the provisions and restores still pending (records `provisioning` or
            `restore_requested`).
        max_blocked_age_seconds (float): Age of the oldest `release_blocked` record (0 when none).
        needs_attention_count (int): Records `needs_attention`: releases that could not be confirmed within their
            budget.
        oldest_attention_age_seconds (float): Time since the oldest `needs_attention` record entered that state (0 when
            none).
        average_release_latency_seconds (float): Mean of `released_at − release_requested_at` over every confirmed
            release, of runs
            restored since too (0 when none).
        release_latency_p50_seconds (float): Quantiles of the same latency over the most recent 10,000 releases.
        release_latency_p95_seconds (float):
        release_latency_p99_seconds (float):
        records_by_state (LifecycleMetricsRecordsByState): Records in each state, by state name.
        generated_at (datetime.datetime):
    """

    active_sandboxes: int
    retained_sandboxes: int
    pending_releases: int
    release_failure_count: int
    release_retry_count: int
    bind_retry_count: int
    max_blocked_age_seconds: float
    needs_attention_count: int
    oldest_attention_age_seconds: float
    average_release_latency_seconds: float
    release_latency_p50_seconds: float
    release_latency_p95_seconds: float
    release_latency_p99_seconds: float
    records_by_state: LifecycleMetricsRecordsByState
    generated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        active_sandboxes = self.active_sandboxes

        retained_sandboxes = self.retained_sandboxes

        pending_releases = self.pending_releases

        release_failure_count = self.release_failure_count

        release_retry_count = self.release_retry_count

        bind_retry_count = self.bind_retry_count

        max_blocked_age_seconds = self.max_blocked_age_seconds

        needs_attention_count = self.needs_attention_count

        oldest_attention_age_seconds = self.oldest_attention_age_seconds

        average_release_latency_seconds = self.average_release_latency_seconds

        release_latency_p50_seconds = self.release_latency_p50_seconds

        release_latency_p95_seconds = self.release_latency_p95_seconds

        release_latency_p99_seconds = self.release_latency_p99_seconds

        records_by_state = self.records_by_state.to_dict()

        generated_at = self.generated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "active_sandboxes": active_sandboxes,
                "retained_sandboxes": retained_sandboxes,
                "pending_releases": pending_releases,
                "release_failure_count": release_failure_count,
                "release_retry_count": release_retry_count,
                "bind_retry_count": bind_retry_count,
                "max_blocked_age_seconds": max_blocked_age_seconds,
                "needs_attention_count": needs_attention_count,
                "oldest_attention_age_seconds": oldest_attention_age_seconds,
                "average_release_latency_seconds": average_release_latency_seconds,
                "release_latency_p50_seconds": release_latency_p50_seconds,
                "release_latency_p95_seconds": release_latency_p95_seconds,
                "release_latency_p99_seconds": release_latency_p99_seconds,
                "records_by_state": records_by_state,
                "generated_at": generated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.lifecycle_metrics_records_by_state import (
            LifecycleMetricsRecordsByState,
        )

        d = dict(src_dict)
        active_sandboxes = d.pop("active_sandboxes")

        retained_sandboxes = d.pop("retained_sandboxes")

        pending_releases = d.pop("pending_releases")

        release_failure_count = d.pop("release_failure_count")

        release_retry_count = d.pop("release_retry_count")

        bind_retry_count = d.pop("bind_retry_count")

        max_blocked_age_seconds = d.pop("max_blocked_age_seconds")

        needs_attention_count = d.pop("needs_attention_count")

        oldest_attention_age_seconds = d.pop("oldest_attention_age_seconds")

        average_release_latency_seconds = d.pop("average_release_latency_seconds")

        release_latency_p50_seconds = d.pop("release_latency_p50_seconds")

        release_latency_p95_seconds = d.pop("release_latency_p95_seconds")

        release_latency_p99_seconds = d.pop("release_latency_p99_seconds")

        records_by_state = LifecycleMetricsRecordsByState.from_dict(
            d.pop("records_by_state")
        )

        generated_at = datetime.datetime.fromisoformat(d.pop("generated_at"))

        lifecycle_metrics = cls(
            active_sandboxes=active_sandboxes,
            retained_sandboxes=retained_sandboxes,
            pending_releases=pending_releases,
            release_failure_count=release_failure_count,
            release_retry_count=release_retry_count,
            bind_retry_count=bind_retry_count,
            max_blocked_age_seconds=max_blocked_age_seconds,
            needs_attention_count=needs_attention_count,
            oldest_attention_age_seconds=oldest_attention_age_seconds,
            average_release_latency_seconds=average_release_latency_seconds,
            release_latency_p50_seconds=release_latency_p50_seconds,
            release_latency_p95_seconds=release_latency_p95_seconds,
            release_latency_p99_seconds=release_latency_p99_seconds,
            records_by_state=records_by_state,
            generated_at=generated_at,
        )

        lifecycle_metrics.additional_properties = d
        return lifecycle_metrics

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
