"""Guardian's object permissions on requests, with direct foreign keys for the hot table
(guardian's performance guide)."""

from __future__ import annotations

from django.db import models
from guardian.models import GroupObjectPermissionBase, UserObjectPermissionBase

from .requests import ApprovalRequest


class ApprovalRequestUserObjectPermission(UserObjectPermissionBase):
    content_object = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE)


class ApprovalRequestGroupObjectPermission(GroupObjectPermissionBase):
    content_object = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE)
