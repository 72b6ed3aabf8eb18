"""Agent callbacks and notifications are one shape of delivery record: the same
fields, the same status read from when it was delivered or given up, the same
attempt rows, so one admin view and one runbook cover both."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from agents.models import CallbackAttempt, CallbackDelivery
from approvals.models import Delivery, DeliveryAttempt, DeliveryStatus, DeliveryTry, Notification


def field_names(model) -> set[str]:
    return {field.name for field in model._meta.local_fields}


def test_both_senders_keep_the_one_record_shape():
    for record, attempt in ((CallbackDelivery, CallbackAttempt), (Notification, DeliveryAttempt)):
        assert issubclass(record, Delivery) and issubclass(attempt, DeliveryTry)
        assert field_names(Delivery) <= {field.name for field in record._meta.fields}
        assert field_names(DeliveryTry) <= {field.name for field in attempt._meta.fields}


def test_the_status_is_read_from_when_it_ended():
    now = timezone.now()
    assert Notification().status == DeliveryStatus.PENDING
    assert Notification(delivered_at=now).status == DeliveryStatus.DELIVERED
    assert CallbackDelivery(gave_up_at=now).status == DeliveryStatus.GAVE_UP


def test_an_outcome_sets_the_same_fields_for_either_sender():
    now, later = timezone.now(), timezone.now() + timedelta(seconds=30)
    for record in (CallbackDelivery(), Notification()):
        assert record.settled_fields(now=now, error="", give_up=False, retry_at=later) == {
            "delivered_at": now,
            "next_attempt_at": None,
            "last_error": "",
        }
        assert record.settled_fields(now=now, error="HTTP 500", give_up=False, retry_at=later) == {
            "next_attempt_at": later,
            "last_error": "HTTP 500",
        }
        assert record.settled_fields(now=now, error="HTTP 500", give_up=True, retry_at=later) == {
            "gave_up_at": now,
            "next_attempt_at": None,
            "last_error": "HTTP 500",
        }
