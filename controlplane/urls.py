from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from controlplane.accounts import provider_round_trip
from controlplane.accounts.backchannel import backchannel_logout
from controlplane.accounts.events import audited_logout
from controlplane.accounts.login import LoginView
from controlplane.channel_relay import relay_endpoint
from controlplane.health import healthz, readyz

api_patterns: list[URLPattern | URLResolver] = [
    path("v1/", include("agents.api.urls")),
    path("v1/", include("approvals.api.urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Split view: the page's script is a separate static file, so a nonce-based CSP can hold.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("internal/channel-relay/", relay_endpoint, name="channel-relay"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", audited_logout(auth_views.LogoutView.as_view()), name="logout"),
    # allauth's pages: the second factor at sign-in, enrolling one, recovery codes.
    path("accounts/login/", LoginView.as_view()),  # allauth's own sign-in address, the same page
    # An identity provider signing someone out here (OpenID Connect back-channel logout).
    path("accounts/oidc/<str:provider_id>/backchannel-logout/", backchannel_logout, name="backchannel-logout"),
    # Step-up by signing in again at the provider (for people who sign in only there).
    path("accounts/step-up/provider/callback/", provider_round_trip.callback, name="provider-step-up-callback"),
    path("accounts/step-up/provider/done/", provider_round_trip.done, name="provider-step-up-done"),
    path("accounts/step-up/provider/<str:nonce>/status/", provider_round_trip.status, name="provider-step-up-status"),
    path("accounts/step-up/provider/<str:nonce>/", provider_round_trip.start, name="provider-step-up"),
    path("accounts/", include("allauth.urls")),
    path("audit/", include("audit.urls")),
    path("rules/", include("approvals.web.rules_urls")),
    path("api/", include((api_patterns, "api"))),
    path("", include("approvals.chat.urls")),
    # The reviewer dashboard owns the site root; keep it last so specific prefixes win.
    path("", include("approvals.web.urls")),
]

# JSON under /api/, Django's pages elsewhere (controlplane/http/errors.py).
handler400 = "controlplane.http.errors.bad_request"
handler403 = "controlplane.http.errors.permission_denied"
handler404 = "controlplane.http.errors.not_found"
handler500 = "controlplane.http.errors.server_error"
