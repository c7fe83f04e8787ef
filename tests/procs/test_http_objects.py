"""The object suite of ``tests/http/test_objects.py`` against two serving processes.

The tests are imported as they are; ``tests/procs/conftest.py`` gives them a two-process
``server`` (and ``server_factory``), so every PUT, GET, HEAD and DELETE there may land on
either process.
"""

from tests.http.test_objects import *  # noqa: F403
