"""The agents' routes under /api/v1/: submit, wait, cancel, claim, renew and complete."""

from django.urls import path

from . import views
from .long_poll import resume_view

urlpatterns = [
    path("actions/", views.ActionSubmitView.as_view(), name="submit-action"),
    path("plans/", views.PlanSubmitView.as_view(), name="submit-plan"),
    path("suspensions/", views.SuspensionSubmitView.as_view(), name="submit-suspension"),
    path("requests/<uuid:pk>/resume/", resume_view, name="request-resume"),
    path("requests/<uuid:pk>/cancel/", views.CancelView.as_view(), name="request-cancel"),
    path("requests/<uuid:pk>/claim/", views.ClaimView.as_view(), name="request-claim"),
    path("requests/<uuid:pk>/renew/", views.RenewView.as_view(), name="request-renew"),
    path("requests/<uuid:pk>/complete/", views.CompleteView.as_view(), name="request-complete"),
]
