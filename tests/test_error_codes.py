"""One error vocabulary: every code any part of the site answers with is registered,
with one status. The audit app may not import the registry, so it declares its own codes
(audit/error_codes.py), which the site registers at start, and answers with the registry's
statuses."""

import ast
from pathlib import Path

from audit import error_codes as audit_codes
from audit import filters as audit_filters
from audit import proof_views as audit_proof_views
from audit import views as audit_views
from audit import witness_views as audit_witness_views
from controlplane.http import codes


def test_the_audit_apps_own_codes_are_registered_with_their_declared_status_and_description():
    registered = {code: (codes.get(code).status, codes.get(code).description) for code in audit_codes.OWN}
    assert registered == audit_codes.OWN


def test_the_audit_app_answers_with_the_registrys_statuses():
    for code in (*audit_codes.OWN, *audit_codes.SHARED):
        assert audit_codes.status(code) == codes.get(code).status


def test_every_code_the_audit_views_answer_with_is_declared():
    trees = [
        ast.parse(Path(module.__file__).read_text()) for module in (audit_views, audit_proof_views, audit_witness_views)
    ]
    answered = {
        node.args[0].value
        for tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "_error"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert answered  # the walk found the views' answers
    answered.add(audit_filters.FilterError.code)  # answered as `_error(exc.code, ...)`
    assert answered <= {*audit_codes.OWN, *audit_codes.SHARED}


def test_the_front_end_receives_every_registered_code():
    assert set(codes.as_script_data().values()) == {code.code for code in codes.all_codes()}
