from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.reply_interaction_payload import ReplyInteractionPayload


T = TypeVar("T", bound="ReplyInteraction")


@_attrs_define
class ReplyInteraction:
    """
    Attributes:
        decision (str):
        payload (ReplyInteractionPayload | Unset):
        expected_revision (int | None | Unset): The interaction revision the user answered; a different current revision
            is a conflict.
        payload_sha256 (None | str | Unset): The digest of the payload the user was shown (the interaction's
            `payload_sha256`): a
            payload that is not that one any more is a conflict, so an answer is bound to it.
        comment (None | str | Unset): Why the user answered so, kept with the resolution.
    """

    decision: str
    payload: ReplyInteractionPayload | Unset = UNSET
    expected_revision: int | None | Unset = UNSET
    payload_sha256: None | str | Unset = UNSET
    comment: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        decision = self.decision

        payload: dict[str, Any] | Unset = UNSET
        if not isinstance(self.payload, Unset):
            payload = self.payload.to_dict()

        expected_revision: int | None | Unset
        if isinstance(self.expected_revision, Unset):
            expected_revision = UNSET
        else:
            expected_revision = self.expected_revision

        payload_sha256: None | str | Unset
        if isinstance(self.payload_sha256, Unset):
            payload_sha256 = UNSET
        else:
            payload_sha256 = self.payload_sha256

        comment: None | str | Unset
        if isinstance(self.comment, Unset):
            comment = UNSET
        else:
            comment = self.comment

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "decision": decision,
            }
        )
        if payload is not UNSET:
            field_dict["payload"] = payload
        if expected_revision is not UNSET:
            field_dict["expected_revision"] = expected_revision
        if payload_sha256 is not UNSET:
            field_dict["payload_sha256"] = payload_sha256
        if comment is not UNSET:
            field_dict["comment"] = comment

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.reply_interaction_payload import ReplyInteractionPayload

        d = dict(src_dict)
        decision = d.pop("decision")

        _payload = d.pop("payload", UNSET)
        payload: ReplyInteractionPayload | Unset
        if isinstance(_payload, Unset):
            payload = UNSET
        else:
            payload = ReplyInteractionPayload.from_dict(_payload)

        def _parse_expected_revision(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        expected_revision = _parse_expected_revision(d.pop("expected_revision", UNSET))

        def _parse_payload_sha256(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        payload_sha256 = _parse_payload_sha256(d.pop("payload_sha256", UNSET))

        def _parse_comment(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        comment = _parse_comment(d.pop("comment", UNSET))

        reply_interaction = cls(
            decision=decision,
            payload=payload,
            expected_revision=expected_revision,
            payload_sha256=payload_sha256,
            comment=comment,
        )

        return reply_interaction
