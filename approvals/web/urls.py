"""The reviewer dashboard's URLs, mounted at the site root (namespace "approvals")."""

from django.urls import path

from . import step_up_challenge, views

app_name = "approvals"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("history/", views.history, name="history"),
    path("queue/sync.json", views.queue_sync, name="queue-sync"),
    path("queue/batch/decide/", views.decide_batch, name="decide-batch"),
    path("requests/<uuid:pk>/", views.request_detail, name="request"),
    path("requests/<uuid:pk>/reveal/", views.reveal, name="reveal"),
    path("requests/<uuid:pk>/card/", views.card_fragment, name="card"),
    path("requests/<uuid:pk>/batch/", views.batch_card, name="batch-card"),
    path("requests/<uuid:pk>/approve/", views.approve, name="approve"),
    path("requests/<uuid:pk>/reject/", views.reject, name="reject"),
    path("requests/<uuid:pk>/approve-with-edits/", views.approve_with_edits, name="approve-with-edits"),
    path("requests/<uuid:pk>/respond/", views.respond, name="respond"),
    path("requests/<uuid:pk>/step-up-challenge/", step_up_challenge.step_up_challenge, name="step-up-challenge"),
]
