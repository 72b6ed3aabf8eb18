"""Routes of /api/v1/ (agents and reviewers) and /api/schema/, /api/docs/."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from approvals.api import BatchDecisionView, DecisionView

from . import views
from .resume import resume_view

app_name = "api"

urlpatterns = [
    path("v1/actions/", views.ActionSubmitView.as_view(), name="submit-action"),
    path("v1/plans/", views.PlanSubmitView.as_view(), name="submit-plan"),
    path("v1/requests/", views.RequestListView.as_view(), name="request-list"),
    path("v1/requests/<uuid:pk>/", views.RequestDetailView.as_view(), name="request-detail"),
    path("v1/requests/<uuid:pk>/resume/", resume_view, name="request-resume"),
    path("v1/requests/<uuid:pk>/cancel/", views.CancelView.as_view(), name="request-cancel"),
    path("v1/requests/<uuid:pk>/claim/", views.ClaimView.as_view(), name="request-claim"),
    path("v1/requests/<uuid:pk>/complete/", views.CompleteView.as_view(), name="request-complete"),
    path("v1/requests/<uuid:pk>/decisions/", DecisionView.as_view(), name="request-decisions"),
    path("v1/decisions/", BatchDecisionView.as_view(), name="batch-decisions"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Split view: the page's script is a separate static file, so a nonce-based CSP can hold.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
]
