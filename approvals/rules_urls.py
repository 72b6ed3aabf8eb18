"""The rule editor, policy history and decision metrics for risk admins, at /rules/
(namespace "rules"), and the reviewer's deadline extension."""

from django.urls import path

from . import rules_views as views

app_name = "rules"

urlpatterns = [
    path("", views.rule_list, name="list"),
    path("new/", views.rule_edit, name="new"),
    path("reorder/", views.reorder, name="reorder"),
    path("validate.json", views.validate, name="validate"),
    path("dry-run.json", views.dry_run, name="dry-run"),
    path("test.json", views.try_sample, name="test"),
    path("samples.json", views.samples, name="samples"),
    path("history/", views.history, name="history"),
    path("history/<int:number>/", views.version, name="version"),
    path("history/<int:number>/restore/", views.restore, name="restore"),
    path("metrics/", views.metrics_page, name="metrics"),
    path("metrics/<str:table>.csv", views.metrics_csv, name="metrics-csv"),
    path("requests/<uuid:pk>/extend-deadline/", views.extend_deadline, name="extend-deadline"),
    path("<str:name>/edit/", views.rule_edit, name="edit"),
    path("<str:name>/toggle/", views.toggle, name="toggle"),
    path("<str:name>/delete/", views.delete, name="delete"),
    path("<str:name>/notifications/", views.notification_settings, name="notifications"),
]
