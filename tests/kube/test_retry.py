"""Which failures the Kubernetes client retries, and how long it waits (no server needed).

- 429 waits what the server's Retry-After says (capped), 5xx and lost
  connections back off exponentially with jitter;
- an answer the caller must act on (403, 404, 409, 410, 422) is raised at
  once, never retried;
- after ``max_attempts`` calls the last failure is raised.

The same policy against a real API server (503 and refused connections while
it restarts) is in ``test_watcher_apiserver.py``.
"""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from kueuestream.agents.kube.client import RetryPolicy, is_transient, with_retry


def api_error(status: int, retry_after: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason="test")
    exc.headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return exc


class Failing:
    """A call that fails with each of ``errors`` in turn, then answers."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "answer"


async def test_transient_failures_are_retried_after_the_right_pause() -> None:
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    call = Failing(
        api_error(429, "3"),
        api_error(429, "600"),  # capped at the policy's longest pause
        api_error(503),
        aiohttp.ServerDisconnectedError(),
        ConnectionRefusedError(),
    )
    policy = RetryPolicy(initial_s=0.5, max_s=10.0, max_attempts=None)
    assert await with_retry(call, policy, sleep) == "answer"
    assert call.calls == 6
    assert pauses[:2] == [3.0, 10.0]
    # Backoff without Retry-After: the 3rd, 4th and 5th failures, jittered in [ceiling/2, ceiling].
    for attempt, pause in zip((3, 4, 5), pauses[2:], strict=True):
        ceiling = min(10.0, 0.5 * 2 ** (attempt - 1))
        assert ceiling / 2 <= pause <= ceiling


@pytest.mark.parametrize("status", [400, 403, 404, 409, 410, 422])
async def test_answers_to_act_on_are_raised_at_once(status: int) -> None:
    call = Failing(api_error(status))
    with pytest.raises(ApiException) as raised:
        await with_retry(call, RetryPolicy(max_attempts=None))
    assert raised.value.status == status and call.calls == 1
    assert not is_transient(raised.value)


async def test_the_last_failure_is_raised_after_max_attempts() -> None:
    async def sleep(seconds: float) -> None:
        pass

    call = Failing(*(api_error(500) for _ in range(5)))
    with pytest.raises(ApiException):
        await with_retry(call, RetryPolicy(max_attempts=3), sleep)
    assert call.calls == 3
