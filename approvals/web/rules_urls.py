"""The rule editor, policy history, four-eyes proposals and decision metrics for risk
admins, at /rules/ (namespace "rules"), and the reviewer's deadline extension."""

from django.urls import path

from . import metrics_views, proposal_views, rules_json_views
from . import rules_views as views

app_name = "rules"

urlpatterns = [
    path("", views.rule_list, name="list"),
    path("new/", views.rule_edit, name="new"),
    path("reorder/", views.reorder, name="reorder"),
    path("destructive-verbs/", views.destructive_verbs, name="destructive-verbs"),
    path("validate.json", rules_json_views.validate, name="validate"),
    path("paths.json", rules_json_views.paths, name="paths"),
    path("dry-run.json", rules_json_views.dry_run, name="dry-run"),
    path("test.json", rules_json_views.try_sample, name="test"),
    path("samples.json", rules_json_views.samples, name="samples"),
    path("history/", proposal_views.history, name="history"),
    path("history/<int:number>/", proposal_views.version, name="version"),
    path("history/<int:number>/restore/", proposal_views.restore, name="restore"),
    path("proposals/<int:pk>/", proposal_views.proposal, name="proposal"),
    path("proposals/<int:pk>/approve/", proposal_views.approve, name="proposal-approve"),
    path("proposals/<int:pk>/reject/", proposal_views.reject, name="proposal-reject"),
    path("metrics/", metrics_views.metrics_page, name="metrics"),
    path("metrics/<str:table>.csv", metrics_views.metrics_csv, name="metrics-csv"),
    path("requests/<uuid:pk>/extend-deadline/", views.extend_deadline, name="extend-deadline"),
    path("<str:name>/edit/", views.rule_edit, name="edit"),
    path("<str:name>/toggle/", views.toggle, name="toggle"),
    path("<str:name>/delete/", views.delete, name="delete"),
    path("<str:name>/notifications/", views.notification_settings, name="notifications"),
]
