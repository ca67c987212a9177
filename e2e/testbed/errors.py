"""The one exception type the test-bed raises for its own failures."""


class TestbedError(RuntimeError):
    """Starting, stopping or probing the test-bed failed; the message says why."""

    __test__ = False  # not a pytest test class despite the name
