from django.contrib import admin, messages

from approvals.people import Person

from .models import Agent, AgentToken, CallbackAttempt, CallbackDelivery
from .services import revoke_token


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "is_active", "created_at"]
    list_filter = ["is_active"]
    search_fields = ["name"]
    exclude = ["callback_secret"]


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin):
    """Tokens are issued with `manage.py create_agent` (shown once); here they are only seen and revoked."""

    list_display = ["prefix", "agent", "label", "scopes", "created_at", "expires_at", "revoked_at", "last_used_at"]
    list_filter = ["revoked_at"]
    search_fields = ["prefix", "agent__name", "label"]
    readonly_fields = [f.name for f in AgentToken._meta.fields]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset) -> None:
        for token in queryset:
            revoke_token(token, actor=Person.from_request(request))
        messages.success(request, f"Revoked {queryset.count()} token(s).")


class CallbackAttemptInline(admin.TabularInline):
    model = CallbackAttempt
    extra = 0
    can_delete = False
    readonly_fields = ["number", "attempted_at", "status_code", "error", "duration_ms"]


@admin.register(CallbackDelivery)
class CallbackDeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "request",
        "state",
        "destination",
        "attempts",
        "last_status",
        "delivered_at",
        "gave_up_at",
        "next_attempt_at",
    ]
    readonly_fields = [f.name for f in CallbackDelivery._meta.fields]
    inlines = [CallbackAttemptInline]
