"""A calm `make run` terminal: the embedded broker's URL names a host, so kombu does not
log "No hostname was supplied" on each connection (it did, in every Celery process)."""

from __future__ import annotations

import logging

from django.conf import settings
from kombu import Connection


def test_the_embedded_broker_url_connects_without_a_hostname_warning(caplog, tmp_path):
    assert settings.EMBEDDED_BROKER_URL.startswith("filesystem://")
    folders = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path), "control_folder": str(tmp_path)}
    with caplog.at_level(logging.WARNING, logger="kombu.connection"):
        with Connection(settings.EMBEDDED_BROKER_URL, transport_options=folders) as connection:
            connection.connect()
            connection.info()
        with Connection("filesystem://", transport_options=folders) as bare:  # what it was
            bare.info()
    warnings = [record.getMessage() for record in caplog.records if "No hostname" in record.getMessage()]
    assert len(warnings) == 1  # the bare URL's, none from the embedded one
