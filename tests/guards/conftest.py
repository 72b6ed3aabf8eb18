"""The guards' stories: each topic's cast and helpers live beside its tests
(`authority`, `revision_story`, `masking_canary`, `client_binding_story`, `bounds_edges`,
`re2_cases`); their fixtures are defined there once and offered to every test here.
"""

from __future__ import annotations

from .authority import wire_cast, wire_cast_four_eyes
from .bounds_edges import ada
from .client_binding_story import alice_person, binding_proxy, decided, keys, pinned_cp
from .masking_canary import canary, masked_rule, seeded
from .revision_story import alice_api, payroll, revision_path, treasury_wire

__all__ = [
    "ada",
    "alice_api",
    "alice_person",
    "binding_proxy",
    "canary",
    "decided",
    "keys",
    "masked_rule",
    "payroll",
    "pinned_cp",
    "revision_path",
    "seeded",
    "treasury_wire",
    "wire_cast",
    "wire_cast_four_eyes",
]
