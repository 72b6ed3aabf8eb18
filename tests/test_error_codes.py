"""One error vocabulary: every code any part of the site answers with is registered,
with one status, and the audit app's own copy (it may not import the registry) agrees."""

from audit.views import ERROR_CODES as AUDIT_ERROR_CODES
from controlplane.http import codes


def test_the_audit_apps_codes_are_registered_with_the_same_status():
    registered = {code: codes.get(code).status for code in AUDIT_ERROR_CODES}
    assert registered == AUDIT_ERROR_CODES


def test_the_front_end_receives_every_registered_code():
    assert set(codes.as_script_data().values()) == {code.code for code in codes.all_codes()}
