"""The event's canonical form compared with RFC 8785 (JCS), checked against the `rfc8785`
package (Trail of Bits), an implementation nobody here wrote.

The two agree on every value the log holds except in exactly two places, which
docs/evidence-format.md ("The canonical form and RFC 8785") states; an independent
verifier written from JCS reproduces every row's bytes as long as those two cases do not
occur in it:

1. Object keys are sorted by code point here, by UTF-16 code unit in JCS: they order
   differently only when one key has a character above U+FFFF where another has one in
   U+E000..U+FFFF at the same position.
2. Integers are written exactly here; JCS writes numbers as IEEE doubles, so an integer
   outside +-(2**53 - 1) has no JCS form (the package refuses it).
"""

from __future__ import annotations

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from hitl_controlplane.canonical import canonical_bytes, event_document

SAFE = 2**53 - 1
# Text without lone surrogates (the API refuses them at the edge; the canonical form cannot encode them).
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
bmp_keys = st.text(st.characters(exclude_categories=("Cs",), max_codepoint=0xFFFF), max_size=8)
scalars = st.none() | st.booleans() | st.integers(-SAFE, SAFE) | text
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(bmp_keys, inner, max_size=4), max_leaves=20
)


@given(values)
def test_every_value_without_the_two_stated_cases_has_the_same_bytes_as_jcs(value):
    assert canonical_bytes(value) == rfc8785.dumps(value)


@given(
    seq=st.integers(1, SAFE),
    verb=st.sampled_from(["request.approved", "audit.checkpoint", "policy.changed"]),
    label=text,
    metadata=st.dictionaries(bmp_keys, values, max_size=5),
)
def test_a_whole_event_document_has_the_same_bytes_as_jcs(seq, verb, label, metadata):
    document = event_document(
        seq=seq,
        occurred_at="2026-12-04T21:00:00.000000Z",
        actor_kind="user",
        actor_id="7",
        actor_label=label,
        verb=verb,
        request_id="5b0c7e3e-1f7a-4c4e-9a51-0d6f5d7f7f10",
        agent_id=None,
        metadata=metadata,
    )
    assert canonical_bytes(document) == rfc8785.dumps(document)


def test_difference_one_keys_above_the_bmp_sort_by_code_point_here_and_by_utf16_in_jcs():
    document = {"\U0001f600": 1, "\ufb01": 2}  # U+1F600 > U+FB01 by code point; its UTF-16 lead D83D < FB01
    assert canonical_bytes(document) == '{"\ufb01":2,"\U0001f600":1}'.encode()
    assert rfc8785.dumps(document) == '{"\U0001f600":1,"\ufb01":2}'.encode()


def test_difference_two_integers_beyond_a_double_are_exact_here_and_have_no_jcs_form():
    assert canonical_bytes({"n": 2**53 + 1}) == b'{"n":9007199254740993}'
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps({"n": 2**53 + 1})
