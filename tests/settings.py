"""The test suite's settings: the deployed settings, with fresh random secrets.

Tests run with DEBUG off, like production, so the development secrets would stop
every server a test starts (controlplane/keys.py). The keys go into the environment
before the settings are read, so the servers, workers and benchmarks the tests start
inherit the same ones.
"""

from controlplane.keys import use_ephemeral_keys

use_ephemeral_keys()

from controlplane.settings import *  # noqa: E402,F403
