"""HTTP plumbing shared by every app: the one error shape and its codes, API
authentication helpers, parsers, pagination, schema helpers, the 4xx/5xx handlers,
the body limit, and the outbound HTTP module.

Imports no app of this project (an import-linter contract holds it to that): apps
build on it, never the other way round.
"""
