from django.apps import AppConfig
from django.db.models.signals import post_migrate


class ApprovalsConfig(AppConfig):
    name = "approvals"
    verbose_name = "Approvals"

    def ready(self) -> None:
        post_migrate.connect(_install_groups_and_seed_policy, sender=self)


def _install_groups_and_seed_policy(sender, using="default", **kwargs) -> None:
    """After every migrate (and test flush): the standard groups, their model
    permissions, and the seed policy when no policy exists yet."""
    from django.contrib.auth.models import Group, Permission

    from .permissions import AUDITORS, RISK_ADMINS, clear_permission_cache, ensure_standard_groups
    from .policy import seed_policy

    clear_permission_cache()
    ensure_standard_groups()
    model_permissions = {
        RISK_ADMINS: [("approvals", c) for c in ("view_riskrule", "add_riskrule", "change_riskrule",
                                                 "delete_riskrule", "view_policyversion")],
        AUDITORS: [("audit", "view_auditevent")],
    }
    for group_name, perms in model_permissions.items():
        group = Group.objects.get(name=group_name)
        for app_label, codename in perms:
            permission = Permission.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if permission is not None:
                group.permissions.add(permission)
    seed_policy()
