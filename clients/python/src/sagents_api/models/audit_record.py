from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.audit_record_data import AuditRecordData


T = TypeVar("T", bound="AuditRecord")


@_attrs_define
class AuditRecord:
    """One audit record as served and exported. `hash` is the SHA-256, in lowercase hex, of the
    record without `hash` in the canonical form of `payload_sha256` (compact JSON, keys
    sorted); `prev_hash` is the hash of the chain's record before it.

        Attributes:
            tenant (str): The tenant whose chain holds it, or `*`.
            sequence (int): Its place in the chain, from 1 without gaps.
            at (datetime.datetime):
            kind (str): What happened: `interaction.resolved`, `interaction.expired`, `run.cancelled`,
                `token.created`, `token.revoked`, `tenant_policy.changed`, `resource.operator_action`.
            actor (str): Who did it: `token:<id>`, `system:expiry`, `cli`.
            subject (str): What it was done to: an interaction, run, token or tenant id.
            data (AuditRecordData):
            prev_hash (str):
            hash_ (str):
            actor_name (None | str | Unset): The actor token's display name then, if it had one.
    """

    tenant: str
    sequence: int
    at: datetime.datetime
    kind: str
    actor: str
    subject: str
    data: AuditRecordData
    prev_hash: str
    hash_: str
    actor_name: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        tenant = self.tenant

        sequence = self.sequence

        at = self.at.isoformat()

        kind = self.kind

        actor = self.actor

        subject = self.subject

        data = self.data.to_dict()

        prev_hash = self.prev_hash

        hash_ = self.hash_

        actor_name: None | str | Unset
        if isinstance(self.actor_name, Unset):
            actor_name = UNSET
        else:
            actor_name = self.actor_name

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "tenant": tenant,
                "sequence": sequence,
                "at": at,
                "kind": kind,
                "actor": actor,
                "subject": subject,
                "data": data,
                "prev_hash": prev_hash,
                "hash": hash_,
            }
        )
        if actor_name is not UNSET:
            field_dict["actor_name"] = actor_name

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.audit_record_data import AuditRecordData

        d = dict(src_dict)
        tenant = d.pop("tenant")

        sequence = d.pop("sequence")

        at = datetime.datetime.fromisoformat(d.pop("at"))

        kind = d.pop("kind")

        actor = d.pop("actor")

        subject = d.pop("subject")

        data = AuditRecordData.from_dict(d.pop("data"))

        prev_hash = d.pop("prev_hash")

        hash_ = d.pop("hash")

        def _parse_actor_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        actor_name = _parse_actor_name(d.pop("actor_name", UNSET))

        audit_record = cls(
            tenant=tenant,
            sequence=sequence,
            at=at,
            kind=kind,
            actor=actor,
            subject=subject,
            data=data,
            prev_hash=prev_hash,
            hash_=hash_,
            actor_name=actor_name,
        )

        return audit_record
