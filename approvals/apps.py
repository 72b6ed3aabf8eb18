from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        post_migrate.connect(_install_groups_and_seed_policy, sender=self)
        # Reviewer sockets close on membership changes and logout (signal receivers).
        # Each side effect of a committed change subscribes to the one domain signal:
        # the browser push, arrival notifications and publishing server-side executions
        # here; agent callbacks in the agents app.
        from . import broadcast
        from .execution import executor_checks, runner  # noqa: F401  (executor_checks registers the executor check)
        from .notifications import dispatch, tasks  # noqa: F401  (tasks register with Celery)
        from .services.core import request_changed
        from .web import consumers  # noqa: F401

        request_changed.connect(broadcast.on_request_changed, dispatch_uid="push-card-events")
        request_changed.connect(dispatch.on_request_changed, dispatch_uid="queue-arrival-notifications")
        request_changed.connect(runner.publish_approved, dispatch_uid="publish-approved-executions")
        from .chat import tasks as chat_tasks

        request_changed.connect(chat_tasks.on_request_changed, dispatch_uid="update-slack-messages")

        # The audit timeline says what a request is now; the audit app may not import this one.
        from audit import subjects

        subjects.register_request_summary(_request_summary)

        # A per-request permission taken away (a regrouping edit, an admin) takes the card off
        # that group's or person's screens.
        from .models import ApprovalRequestGroupObjectPermission, ApprovalRequestUserObjectPermission

        for model in (ApprovalRequestGroupObjectPermission, ApprovalRequestUserObjectPermission):
            post_delete.connect(
                broadcast.on_object_permission_deleted,
                sender=model,
                dispatch_uid=f"card-removed-on-lost-{model.__name__}",
            )

        # A server started on a test database (tests/live.py) sees it flushed and
        # re-seeded under it between tests, which gives permissions and content types
        # new ids: forget the cached ones at each request there. Never set in production.
        import os

        if os.environ.get("CONTROLPLANE_DATABASE_FLUSHED_UNDER_US") == "1":
            from django.core.signals import request_started

            request_started.connect(_forget_cached_row_ids, dispatch_uid="forget-cached-row-ids")


def _request_summary(request_id):
    """The header of a request's audit timeline (templates/audit/timeline.html), or None."""
    from .models import ApprovalRequest

    return (
        ApprovalRequest.objects.filter(pk=request_id)
        .values("id", "action_type", "kind", "state", "risk_level", "rule_name", "created_at", "agent__name")
        .first()
    )


def _forget_cached_row_ids(**kwargs) -> None:
    from django.contrib.contenttypes.models import ContentType

    from .permissions import clear_permission_cache

    clear_permission_cache()
    ContentType.objects.clear_cache()


def _install_groups_and_seed_policy(sender, using="default", **kwargs) -> None:
    """After every migrate (and test flush): the standard groups, their model
    permissions, and the seed policy when no policy exists yet."""
    from django.contrib.auth.models import Group, Permission

    from .permissions import AUDITORS, RISK_ADMINS, clear_permission_cache, ensure_standard_groups
    from .policy import seed_policy

    clear_permission_cache()
    ensure_standard_groups()
    model_permissions = {
        RISK_ADMINS: [
            ("approvals", c)
            for c in ("view_riskrule", "add_riskrule", "change_riskrule", "delete_riskrule", "view_policyversion")
        ],
        AUDITORS: [("audit", "view_auditevent"), ("audit", "export_auditevent"), ("audit", "view_chainverification")],
    }
    for group_name, perms in model_permissions.items():
        group = Group.objects.get(name=group_name)
        for app_label, codename in perms:
            permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if permission is not None:
                group.permissions.add(permission)
    seed_policy()
