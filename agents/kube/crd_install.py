"""Install :mod:`.crds` into a cluster and wait until the API server serves them."""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import Any

from kueuestream.agents.kube.api_calls import apply_object, get_json
from kueuestream.agents.kube.client import KubeConnection, with_retry
from kueuestream.agents.kube.crds import GROUP, VERSION, all_crds
from kueuestream.agents.kube.rest import NOT_FOUND, status_of

FIELD_MANAGER = "kueuestream"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _established(crd: dict[str, Any]) -> bool:
    # Right after an apply the status may not be set yet: not established.
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def install_crds(conn: KubeConnection, *, timeout_s: float = 60.0) -> list[str]:
    """Apply every CRD (server-side apply, field manager ``kueuestream``); their names once all are served.

    Served means established and listed by the group's discovery, which the
    API server updates a moment after a CRD is established.
    """
    names = []
    plurals = set()
    for crd in all_crds():
        name = crd["metadata"]["name"]
        names.append(name)
        plurals.add(crd["spec"]["names"]["plural"])
        path = f"{CRD_PATH}/{name}"
        await with_retry(partial(apply_object, conn.api, path, crd, field_manager=FIELD_MANAGER))
    deadline = time.monotonic() + timeout_s
    pending = set(names)
    while pending:
        for name in sorted(pending):
            if _established(await with_retry(partial(get_json, conn.api, f"{CRD_PATH}/{name}"))):
                pending.discard(name)
        if not pending:
            listed = await _discovered(conn)
            pending = {f"{p}.{GROUP}" for p in plurals - listed}
        if pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRDs not served after {timeout_s:g}s: {', '.join(sorted(pending))}")
            await asyncio.sleep(0.2)
    return names


async def _discovered(conn: KubeConnection) -> set[str]:
    """The resources the group's discovery lists; none while the group itself is not listed yet."""
    try:
        discovery = await with_retry(partial(get_json, conn.api, f"/apis/{GROUP}/{VERSION}"))
    except Exception as exc:
        if status_of(exc) == NOT_FOUND:
            return set()
        raise
    return {str(r.get("name")) for r in discovery.get("resources") or []}
