"""The approvals app's models, split by concern: approval requests with their
revisions and decisions (`requests`), the risk rules, policy versions and proposals
(`policy`), guardian's object permissions, the emergency stop's switches and the
per-rule notification settings. Import them from here.
"""

from .chat import SlackLink, SlackLinkStart, SlackMessage
from .deliveries import Delivery, DeliveryStatus, DeliveryTry
from .emergency import EmergencyStop
from .notifications import DeadlineExtension, DeliveryAttempt, Notification, RuleNotification
from .object_permissions import ApprovalRequestGroupObjectPermission, ApprovalRequestUserObjectPermission
from .policy import PolicyProposal, PolicyVersion, RiskRule
from .requests import (
    ACTION_DECISIONS,
    DECIDED_BY_POLICY,
    DEFAULT_ALLOWED_DECISIONS,
    ApprovalRequest,
    ApprovalRequestQuerySet,
    Decision,
    ParamsRevision,
)

__all__ = [
    "SlackLink",
    "SlackLinkStart",
    "SlackMessage",
    "ACTION_DECISIONS",
    "DECIDED_BY_POLICY",
    "DEFAULT_ALLOWED_DECISIONS",
    "ApprovalRequest",
    "ApprovalRequestGroupObjectPermission",
    "ApprovalRequestQuerySet",
    "ApprovalRequestUserObjectPermission",
    "Decision",
    "DeadlineExtension",
    "Delivery",
    "DeliveryStatus",
    "DeliveryTry",
    "DeliveryAttempt",
    "EmergencyStop",
    "Notification",
    "ParamsRevision",
    "PolicyProposal",
    "PolicyVersion",
    "RiskRule",
    "RuleNotification",
]
