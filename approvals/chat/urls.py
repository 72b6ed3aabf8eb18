from django.urls import path

from . import views

urlpatterns = [
    path("slack/interactivity/", views.interactivity, name="slack-interactivity"),
    path("slack/commands/link/", views.link_command, name="slack-link-command"),
    path("slack/links/", views.links, name="slack-links"),
    path("slack/link/<str:token>/", views.confirm_link, name="slack-link"),
    path("slack/unlink/", views.unlink, name="slack-unlink"),
]
