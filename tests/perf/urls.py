"""The app's routes plus `POST /bench/baseline/`: a bare DRF create on a table of
the same shape, authenticated the same way, with no classification, audit or push."""

from django.urls import path
from rest_framework import generics, serializers

from agents.api.auth import BearerTokenAuthentication
from controlplane.urls import urlpatterns as app_urlpatterns

from .baseline.models import BaselineRequest


class BaselineSerializer(serializers.ModelSerializer):
    class Meta:
        model = BaselineRequest
        fields = [
            "id",
            "action_type",
            "target",
            "params",
            "declared",
            "run_id",
            "tool_call_id",
            "idempotency_key",
            "state",
            "risk_level",
            "created_at",
        ]
        read_only_fields = ["id", "state", "risk_level", "created_at"]


class BaselineCreate(generics.CreateAPIView):
    authentication_classes = [BearerTokenAuthentication]
    serializer_class = BaselineSerializer

    def perform_create(self, serializer):
        serializer.save(agent=self.request.user.agent)


urlpatterns = [*app_urlpatterns, path("bench/baseline/", BaselineCreate.as_view())]
