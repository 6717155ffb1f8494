"""Contains all the data models used in inputs/outputs"""

from .attention_action import AttentionAction
from .attention_item import AttentionItem
from .attention_page import AttentionPage
from .audit_page import AuditPage
from .audit_record import AuditRecord
from .audit_record_data import AuditRecordData
from .capabilities import Capabilities
from .checkpoint import Checkpoint
from .checkpoint_ref import CheckpointRef
from .checkpoint_state import CheckpointState
from .claim import Claim
from .claim_kind import ClaimKind
from .claim_request import ClaimRequest
from .claim_response import ClaimResponse
from .claim_sandbox import ClaimSandbox
from .complete_run import CompleteRun
from .complete_run_output import CompleteRunOutput
from .confirm_resumed import ConfirmResumed
from .create_job import CreateJob
from .create_job_payload import CreateJobPayload
from .create_run import CreateRun
from .create_run_input import CreateRunInput
from .create_session import CreateSession
from .create_session_metadata import CreateSessionMetadata
from .create_token import CreateToken
from .created_token import CreatedToken
from .event_page import EventPage
from .execution_affinity import ExecutionAffinity
from .execution_resource_record import ExecutionResourceRecord
from .expected_hashes import ExpectedHashes
from .expiry_default import ExpiryDefault
from .fail_run import FailRun
from .fail_run_error import FailRunError
from .field_error import FieldError
from .health import Health
from .heartbeat import Heartbeat
from .heartbeat_response import HeartbeatResponse
from .inbox_item import InboxItem
from .inbox_page import InboxPage
from .interaction_request import InteractionRequest
from .interaction_request_payload import InteractionRequestPayload
from .interaction_status import InteractionStatus
from .interaction_type import InteractionType
from .job import Job
from .job_list import JobList
from .job_payload import JobPayload
from .job_state import JobState
from .lease import Lease
from .lease_holder import LeaseHolder
from .lifecycle_metrics import LifecycleMetrics
from .lifecycle_metrics_records_by_state import LifecycleMetricsRecordsByState
from .lifecycle_policy import LifecyclePolicy
from .list_inbox_status import ListInboxStatus
from .network_mode import NetworkMode
from .new_checkpoint import NewCheckpoint
from .new_checkpoint_state import NewCheckpointState
from .new_interaction import NewInteraction
from .new_interaction_payload import NewInteractionPayload
from .on_expiry_cancel import OnExpiryCancel
from .on_expiry_cancel_action import OnExpiryCancelAction
from .on_expiry_decide import OnExpiryDecide
from .on_expiry_decide_action import OnExpiryDecideAction
from .on_expiry_fail import OnExpiryFail
from .on_expiry_fail_action import OnExpiryFailAction
from .pause_behavior import PauseBehavior
from .pending_interaction import PendingInteraction
from .pending_interaction_payload import PendingInteractionPayload
from .problem import Problem
from .provider_error import ProviderError
from .provider_info import ProviderInfo
from .provider_list import ProviderList
from .register_provider import RegisterProvider
from .release_disposition import ReleaseDisposition
from .release_purpose import ReleasePurpose
from .reply_interaction import ReplyInteraction
from .reply_interaction_payload import ReplyInteractionPayload
from .reply_outcome import ReplyOutcome
from .resolution import Resolution
from .resolution_payload import ResolutionPayload
from .resolve_attention import ResolveAttention
from .resolved_sandbox_spec import ResolvedSandboxSpec
from .resolved_sandbox_spec_metadata import ResolvedSandboxSpecMetadata
from .resource_event import ResourceEvent
from .resource_event_data import ResourceEventData
from .resource_event_page import ResourceEventPage
from .resource_state import ResourceState
from .resources import Resources
from .role import Role
from .run import Run
from .run_error_type_0 import RunErrorType0
from .run_input import RunInput
from .run_output_type_0 import RunOutputType0
from .run_read_back import RunReadBack
from .run_state import RunState
from .run_status import RunStatus
from .sandbox_ref import SandboxRef
from .session import Session
from .session_event import SessionEvent
from .session_event_data import SessionEventData
from .session_metadata import SessionMetadata
from .session_page import SessionPage
from .snapshot import Snapshot
from .snapshot_run import SnapshotRun
from .snapshot_session import SnapshotSession
from .snapshot_session_metadata import SnapshotSessionMetadata
from .spec_version import SpecVersion
from .stream_events_response_200 import StreamEventsResponse200
from .suspend_run import SuspendRun
from .suspension_reason import SuspensionReason
from .tenant_policy import TenantPolicy
from .tenant_policy_info import TenantPolicyInfo
from .token_info import TokenInfo
from .token_list import TokenList
from .update_job import UpdateJob
from .workspace_mode import WorkspaceMode

__all__ = (
    "AttentionAction",
    "AttentionItem",
    "AttentionPage",
    "AuditPage",
    "AuditRecord",
    "AuditRecordData",
    "Capabilities",
    "Checkpoint",
    "CheckpointRef",
    "CheckpointState",
    "Claim",
    "ClaimKind",
    "ClaimRequest",
    "ClaimResponse",
    "ClaimSandbox",
    "CompleteRun",
    "CompleteRunOutput",
    "ConfirmResumed",
    "CreateJob",
    "CreateJobPayload",
    "CreateRun",
    "CreateRunInput",
    "CreateSession",
    "CreateSessionMetadata",
    "CreateToken",
    "CreatedToken",
    "EventPage",
    "ExecutionAffinity",
    "ExecutionResourceRecord",
    "ExpectedHashes",
    "ExpiryDefault",
    "FailRun",
    "FailRunError",
    "FieldError",
    "Health",
    "Heartbeat",
    "HeartbeatResponse",
    "InboxItem",
    "InboxPage",
    "InteractionRequest",
    "InteractionRequestPayload",
    "InteractionStatus",
    "InteractionType",
    "Job",
    "JobList",
    "JobPayload",
    "JobState",
    "Lease",
    "LeaseHolder",
    "LifecycleMetrics",
    "LifecycleMetricsRecordsByState",
    "LifecyclePolicy",
    "ListInboxStatus",
    "NetworkMode",
    "NewCheckpoint",
    "NewCheckpointState",
    "NewInteraction",
    "NewInteractionPayload",
    "OnExpiryCancel",
    "OnExpiryCancelAction",
    "OnExpiryDecide",
    "OnExpiryDecideAction",
    "OnExpiryFail",
    "OnExpiryFailAction",
    "PauseBehavior",
    "PendingInteraction",
    "PendingInteractionPayload",
    "Problem",
    "ProviderError",
    "ProviderInfo",
    "ProviderList",
    "RegisterProvider",
    "ReleaseDisposition",
    "ReleasePurpose",
    "ReplyInteraction",
    "ReplyInteractionPayload",
    "ReplyOutcome",
    "Resolution",
    "ResolutionPayload",
    "ResolveAttention",
    "ResolvedSandboxSpec",
    "ResolvedSandboxSpecMetadata",
    "ResourceEvent",
    "ResourceEventData",
    "ResourceEventPage",
    "ResourceState",
    "Resources",
    "Role",
    "Run",
    "RunErrorType0",
    "RunInput",
    "RunOutputType0",
    "RunReadBack",
    "RunState",
    "RunStatus",
    "SandboxRef",
    "Session",
    "SessionEvent",
    "SessionEventData",
    "SessionMetadata",
    "SessionPage",
    "Snapshot",
    "SnapshotRun",
    "SnapshotSession",
    "SnapshotSessionMetadata",
    "SpecVersion",
    "StreamEventsResponse200",
    "SuspendRun",
    "SuspensionReason",
    "TenantPolicy",
    "TenantPolicyInfo",
    "TokenInfo",
    "TokenList",
    "UpdateJob",
    "WorkspaceMode",
)
