from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from approvals.auth import LoginView
from controlplane.channel_relay import relay_endpoint
from controlplane.health import healthz, readyz


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("internal/channel-relay/", relay_endpoint, name="channel-relay"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("audit/", include("audit.urls")),
    path("rules/", include("approvals.rules_urls")),
    path("api/", include("agents.api.urls")),
    # The reviewer dashboard owns the site root; keep it last so specific prefixes win.
    path("", include("approvals.urls")),
]

# JSON under /api/, Django's pages elsewhere (agents/api/errors.py).
handler400 = "agents.api.errors.bad_request"
handler403 = "agents.api.errors.permission_denied"
handler404 = "agents.api.errors.not_found"
handler500 = "agents.api.errors.server_error"
