"""Routes under /api/v1/ for reading requests and deciding them."""

from django.urls import path

from . import challenges, views

urlpatterns = [
    path("requests/", views.RequestListView.as_view(), name="request-list"),
    path("requests/<uuid:pk>/", views.RequestDetailView.as_view(), name="request-detail"),
    path("requests/<uuid:pk>/decisions/", views.DecisionView.as_view(), name="request-decisions"),
    path("requests/<uuid:pk>/reveal/", views.RevealView.as_view(), name="request-reveal"),
    path("decisions/", views.BatchDecisionView.as_view(), name="batch-decisions"),
    path("step-up/challenges/", challenges.StepUpChallengeView.as_view(), name="step-up-challenges"),
]
