from django.contrib import admin

from .models import Agent


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "is_active", "emergency_stop", "created_at"]
    list_filter = ["is_active", "emergency_stop"]
    search_fields = ["name"]
