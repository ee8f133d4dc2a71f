"""DRA devices counted into quota (KEP-2941 structured parameters, KEP-4816 prioritized lists).

Every ``podSpec.resourceClaims`` entry of a pending Workload that names a
ResourceClaimTemplate is read from the Workload's namespace. Each request of the
template asks for devices of one DeviceClass; the devices are summed per class,
mapped to logical resources through ``resources.deviceClassMappings`` and added
to the pod set's per-pod requests (the engine multiplies by the pod count).

- ExactCount requests count ``count`` devices (1 when unset).
- ``adminAccess: true`` requests are not counted.
- ``firstAvailable``: every alternative is counted, each against its own class,
  so choosing one can never get round quota (KEP-4816, "Resource Quota").
- ``allocationMode: All``: the worst case, the most devices one claim could get:
  the largest number of devices a single ResourceSlice pool (driver plus pool
  name, newest generation only) offers that the class can match. Only selectors
  of the form ``device.driver == "<name>"`` are decided; every other selector is
  assumed to match, so quota is never under-counted.

A Workload that cannot be counted is inadmissible, with a message naming the pod
set, the claim and the cause. Everything here is pure and deterministic: maps are
read in sorted order and the result depends only on the objects stored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kueuestream.admission.api.base import ApiModel
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.dra import (
    ALL,
    ALLOCATION_MODES,
    MAX_SUBREQUESTS,
    DeviceAsk,
    DeviceClass,
    DeviceSubRequest,
    ResourceClaim,
    ResourceClaimSpec,
    ResourceClaimTemplate,
    ResourceSlice,
    is_flat,
)
from kueuestream.admission.api.kueue import Workload
from kueuestream.admission.errors import FieldError
from kueuestream.admission.events import ObjectRef
from kueuestream.admission.quantity import Quantity, resource_value

Key = tuple[str, str]  # (namespace, name)
PoolKey = tuple[str, str]  # (driver, pool name)

TEMPLATE_KIND = "ResourceClaimTemplate"
CLAIM_KIND = "ResourceClaim"
CLASS_KIND = "DeviceClass"
SLICE_KIND = "ResourceSlice"
DRA_KINDS = (TEMPLATE_KIND, CLAIM_KIND, CLASS_KIND, SLICE_KIND)


@dataclass(frozen=True, slots=True)
class Counted:
    """Per pod set, the logical resources one pod adds; or why they cannot be counted."""

    per_pod: dict[str, dict[str, int]] = field(default_factory=dict)
    problem: str = ""


# ---------------------------------------------------------------- validation


def _mode_and_count(
    path: str, allocation_mode: str | None, count: int | None, errors: list[FieldError]
) -> None:
    mode = allocation_mode or ""
    if mode and mode not in ALLOCATION_MODES:
        errors.append(
            FieldError(
                f"{path}.allocationMode",
                f"unsupported value {mode!r}; accepted values: {', '.join(ALLOCATION_MODES)}",
            )
        )
        return
    if count is None:
        return
    if mode == ALL:
        errors.append(FieldError(f"{path}.count", "must not be set when allocationMode is All"))
    elif count <= 0:
        errors.append(FieldError(f"{path}.count", f"must be greater than zero, got {count}"))


def _class_name(path: str, device_class_name: str | None, errors: list[FieldError]) -> None:
    if not device_class_name:
        errors.append(FieldError(f"{path}.deviceClassName", "required field is missing"))


def _subrequests(path: str, subs: Sequence[DeviceSubRequest], errors: list[FieldError]) -> None:
    if len(subs) > MAX_SUBREQUESTS:
        errors.append(FieldError(path, f"at most {MAX_SUBREQUESTS} subrequests, got {len(subs)}"))
    for j, sub in enumerate(subs):
        spath = f"{path}[{j}]"
        if sub.first_available is not None:
            errors.append(
                FieldError(
                    f"{spath}.firstAvailable",
                    "must not be set: firstAvailable cannot be nested in a subrequest",
                )
            )
        if sub.admin_access is not None:
            errors.append(
                FieldError(
                    f"{spath}.adminAccess",
                    "must not be set: adminAccess is only allowed on a request without firstAvailable",
                )
            )
        _class_name(spath, sub.device_class_name, errors)
        _mode_and_count(spath, sub.allocation_mode, sub.count, errors)


_FLAT_FIELDS = (
    ("deviceClassName", "device_class_name"),
    ("selectors", "selectors"),
    ("allocationMode", "allocation_mode"),
    ("count", "count"),
    ("adminAccess", "admin_access"),
)


def validate_claim_spec(spec: ResourceClaimSpec, flat: bool, base: str) -> list[FieldError]:
    """The request shapes KEP-4816 allows, as field errors under ``base``.

    v1alpha3/v1beta1 (``flat``): a request has either deviceClassName or
    firstAvailable, and with firstAvailable none of the other request fields.
    v1beta2/v1: exactly one of ``exactly`` and ``firstAvailable``.
    Both: at most 8 subrequests, none nested, none with adminAccess; counts
    greater than zero; allocation modes ExactCount or All.
    """
    errors: list[FieldError] = []
    for i, req in enumerate(spec.devices.requests):
        path = f"{base}.devices.requests[{i}]"
        subs = req.first_available or []
        if flat:
            if subs:
                for json_name, attr in _FLAT_FIELDS:
                    if getattr(req, attr) is not None:
                        errors.append(
                            FieldError(f"{path}.{json_name}", "must not be set when firstAvailable is set")
                        )
                _subrequests(f"{path}.firstAvailable", subs, errors)
                continue
            if not req.device_class_name:
                hint = (
                    " (exactly is the v1beta2/v1 shape; this apiVersion puts deviceClassName on the request)"
                    if req.exactly is not None
                    else ""
                )
                errors.append(
                    FieldError(
                        f"{path}.deviceClassName",
                        f"required: a request needs either deviceClassName or firstAvailable{hint}",
                    )
                )
            _mode_and_count(path, req.allocation_mode, req.count, errors)
            continue
        if req.exactly is not None and subs:
            errors.append(FieldError(path, "exactly one of exactly and firstAvailable may be set, got both"))
            continue
        if req.exactly is None and not subs:
            hint = (
                " (deviceClassName directly on the request is the v1beta1 shape; "
                "v1beta2 and v1 put it under exactly)"
                if req.device_class_name is not None
                else ""
            )
            errors.append(
                FieldError(path, f"exactly one of exactly and firstAvailable must be set, got neither{hint}")
            )
            continue
        if req.exactly is not None:
            epath = f"{path}.exactly"
            _class_name(epath, req.exactly.device_class_name, errors)
            _mode_and_count(epath, req.exactly.allocation_mode, req.exactly.count, errors)
        else:
            _subrequests(f"{path}.firstAvailable", subs, errors)
    return errors


def validate_resource_claim_template(obj: ResourceClaimTemplate) -> list[FieldError]:
    return validate_claim_spec(obj.spec.spec, is_flat(obj.api_version), "spec.spec")


def validate_resource_claim(obj: ResourceClaim) -> list[FieldError]:
    return validate_claim_spec(obj.spec, is_flat(obj.api_version), "spec")


# ------------------------------------------------------------ CEL selectors

_DRIVER_EQ = re.compile(
    r"""^(?:device\.driver\s*==\s*(?P<q1>["'])(?P<v1>[^"'\\]*)(?P=q1)"""
    r"""|(?P<q2>["'])(?P<v2>[^"'\\]*)(?P=q2)\s*==\s*device\.driver)$"""
)
_OPEN = "([{"
_CLOSE = ")]}"


def _code(expr: str) -> list[tuple[int, str]] | None:
    """The characters of ``expr`` outside string literals, with their positions.

    Handles '…', "…" and their triple-quoted forms with backslash escapes.
    None when a string literal is not terminated.
    """
    out: list[tuple[int, str]] = []
    i, n = 0, len(expr)
    while i < n:
        ch = expr[i]
        if ch in "\"'":
            quote = ch * 3 if expr.startswith(ch * 3, i) else ch
            i += len(quote)
            while i < n and not expr.startswith(quote, i):
                i += 2 if expr[i] == "\\" else 1
            if i >= n:
                return None
            i += len(quote)
            continue
        out.append((i, ch))
        i += 1
    return out


def _top_level_split(expr: str) -> list[str] | None:
    """Split at top-level ``&&``; None when the expression is not a plain conjunction.

    A top-level ``||`` or ``?`` (both bind looser than ``&&``), unbalanced
    brackets or an unterminated string make the expression undecidable here.
    """
    code = _code(expr)
    if code is None:
        return None
    parts: list[str] = []
    depth = 0
    start = 0
    previous = (-2, "")
    for i, ch in code:
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and (ch == "?" or (ch == "|" and previous == (i - 1, "|"))):
            return None
        elif depth == 0 and ch == "&" and previous == (i - 1, "&"):
            parts.append(expr[start : i - 1])
            start = i + 1
            ch = ""  # "&&&" is not two operators
        previous = (i, ch)
    if depth != 0:
        return None
    parts.append(expr[start:])
    return parts


def _wrapped(expr: str) -> bool:
    """True when the whole expression sits inside one pair of parentheses."""
    code = _code(expr)
    if not code or code[0] != (0, "(") or code[-1] != (len(expr) - 1, ")"):
        return False
    depth = 0
    for i, ch in code:
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                # "(a) && (b)" starts and ends with parentheses that are not one pair.
                return i == len(expr) - 1
    return False


def required_drivers(expression: str) -> frozenset[str]:
    """The drivers a CEL selector requires through ``device.driver == "<name>"`` conjuncts.

    Empty when the selector does not decide the driver that way; it is then not
    evaluated and treated as matching every device.
    """
    out: set[str] = set()
    pending = [expression.strip()]
    while pending:
        expr = pending.pop()
        while _wrapped(expr):
            expr = expr[1:-1].strip()
        parts = _top_level_split(expr)
        if parts is None:
            continue
        if len(parts) > 1:
            pending.extend(p.strip() for p in parts)
            continue
        match = _DRIVER_EQ.match(expr)
        if match:
            out.add(match.group("v1") if match.group("v1") is not None else match.group("v2"))
    return frozenset(out)


# -------------------------------------------------------------------- state


def _device_amount(resource: str, devices: int) -> int:
    # In the engine's units (a mapping named cpu would be held in millicores).
    return resource_value(resource, Quantity(Fraction(devices)))


class DraState:
    """The DRA objects admission reads, and the counting of a Workload's devices."""

    def __init__(self) -> None:
        self.templates: dict[Key, ResourceClaimTemplate] = {}
        self.claims: dict[Key, ResourceClaim] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.slices: dict[str, ResourceSlice] = {}
        # Templates the decoder refused (and none stored under that name), with why.
        self.refused: dict[Key, str] = {}
        self._pools: dict[PoolKey, int] | None = None

    # ------------------------------------------------------------ objects

    def store(self, obj: ApiModel) -> bool:
        """Take a DRA object; True when Workloads' device counts may have changed."""
        if isinstance(obj, ResourceClaimTemplate):
            return self._store_template(obj)
        if isinstance(obj, ResourceClaim):
            # Kept for completeness; a Workload referencing a claim directly is
            # inadmissible whatever the claim holds, so no count changes.
            self.claims[(obj.metadata.namespace, obj.metadata.name)] = obj
            return False
        if isinstance(obj, DeviceClass):
            old = self.classes.get(obj.metadata.name)
            self.classes[obj.metadata.name] = obj
            return old is None or old.expressions() != obj.expressions()
        if isinstance(obj, ResourceSlice):
            old_slice = self.slices.get(obj.metadata.name)
            self.slices[obj.metadata.name] = obj
            changed = old_slice is None or self._slice_shape(old_slice) != self._slice_shape(obj)
            if changed:
                self._pools = None
            return changed
        return False

    def _store_template(self, obj: ResourceClaimTemplate) -> bool:
        key = (obj.metadata.namespace, obj.metadata.name)
        refused = self.refused.pop(key, None) is not None
        old = self.templates.get(key)
        if old is None:
            self.templates[key] = obj
            return True
        if old.device_asks() == obj.device_asks():
            return refused
        if old.metadata.uid and obj.metadata.uid and old.metadata.uid != obj.metadata.uid:
            # Deleted and created again, the deletion unseen: a new template.
            self.templates[key] = obj
            return True
        # Templates are immutable: the API server refuses such an update and keeps
        # the stored template, and so do we.
        return refused

    def refuse(self, ref: ObjectRef, errors: Sequence[FieldError]) -> bool:
        """A DRA object the decoder refused; True when device counts may have changed.

        A refused ResourceClaimTemplate is remembered (unless a valid one is
        stored under its name, which the API server would keep) so that the
        Workloads using it say why they cannot be counted.
        """
        if ref.kind != TEMPLATE_KIND or not ref.name:
            return False
        key = (ref.namespace, ref.name)
        if key in self.templates:
            return False
        why = ", ".join(str(e) for e in errors)
        if self.refused.get(key) == why:
            return False
        self.refused[key] = why
        return True

    def delete(self, ref: ObjectRef) -> bool:
        key = (ref.namespace, ref.name)
        if ref.kind == TEMPLATE_KIND:
            removed = self.templates.pop(key, None) is not None
            return (self.refused.pop(key, None) is not None) or removed
        if ref.kind == CLAIM_KIND:
            self.claims.pop(key, None)
            return False
        if ref.kind == CLASS_KIND:
            return self.classes.pop(ref.name, None) is not None
        if ref.kind == SLICE_KIND:
            if self.slices.pop(ref.name, None) is None:
                return False
            self._pools = None
            return True
        return False

    @staticmethod
    def _slice_shape(s: ResourceSlice) -> tuple[str, str, int, int]:
        return (s.spec.driver, s.spec.pool.name, s.spec.pool.generation, len(s.spec.devices))

    # ------------------------------------------------------------ pools

    def pools(self) -> dict[PoolKey, int]:
        """Devices per pool, counting only the slices of each pool's newest generation."""
        if self._pools is None:
            newest: dict[PoolKey, int] = {}
            for name in sorted(self.slices):
                spec = self.slices[name].spec
                key = (spec.driver, spec.pool.name)
                newest[key] = max(newest.get(key, spec.pool.generation), spec.pool.generation)
            devices: dict[PoolKey, int] = {}
            for name in sorted(self.slices):
                spec = self.slices[name].spec
                key = (spec.driver, spec.pool.name)
                if spec.pool.generation == newest[key]:
                    devices[key] = devices.get(key, 0) + len(spec.devices)
            self._pools = dict(sorted(devices.items()))
        return self._pools

    def all_devices(self, ask: DeviceAsk) -> int:
        """The most devices one claim asking for all devices of ``ask``'s class can get.

        0 when no pool has a device the class (and the request's selectors) can match.
        """
        drivers: set[str] = set()
        cls = self.classes.get(ask.device_class_name)
        expressions = (*(cls.expressions() if cls is not None else ()), *ask.selectors)
        for expression in expressions:
            drivers |= required_drivers(expression)
        if len(drivers) > 1:
            return 0  # two different drivers required at once: no device matches
        return max(
            (n for (driver, _), n in self.pools().items() if not drivers or driver in drivers),
            default=0,
        )

    # ------------------------------------------------------------ counting

    def count(self, wl: Workload, config: Configuration) -> Counted:
        """Per pod set, the logical resources one pod's claims add; or why they cannot be counted."""
        if not any(ps.template.spec.resource_claims for ps in wl.spec.pod_sets):
            return Counted({}, "")
        mapping: dict[str, str] = {}
        for m in config.resources.device_class_mappings:
            for cls in m.device_class_names:
                # Validation refuses a class in two mappings; should one get through, the first wins.
                mapping.setdefault(cls, m.name)
        namespace = wl.metadata.namespace
        per_pod: dict[str, dict[str, int]] = {}
        problems: list[str] = []
        for ps in wl.spec.pod_sets:
            amounts: dict[str, int] = {}
            for claim in ps.template.spec.resource_claims:
                where = f"pod set {ps.name}, resource claim {claim.name}"
                if claim.resource_claim_name:
                    problems.append(
                        f"{where}: uses ResourceClaim {claim.resource_claim_name} directly "
                        "(resourceClaimName), which is not supported; "
                        "use a ResourceClaimTemplate (resourceClaimTemplateName)"
                    )
                    continue
                name = claim.resource_claim_template_name
                if not name:
                    continue
                problem = self._count_template(where, (namespace, name), mapping, amounts)
                if problem:
                    problems.append(problem)
            if amounts:
                per_pod[ps.name] = dict(sorted(amounts.items()))
        if problems:
            return Counted({}, "; ".join(problems))
        return Counted(per_pod, "")

    def _count_template(self, where: str, key: Key, mapping: dict[str, str], amounts: dict[str, int]) -> str:
        ident = f"ResourceClaimTemplate {key[0]}/{key[1]}"
        if key in self.refused:
            return f"{where}: {ident} is invalid: {self.refused[key]}"
        template = self.templates.get(key)
        if template is None:
            return f"{where}: {ident} not found"
        errors = validate_resource_claim_template(template)
        if errors:
            return f"{where}: {ident} is invalid: {', '.join(str(e) for e in errors)}"
        per_class: dict[str, int] = {}
        causes: list[str] = []
        for ask in template.device_asks():
            if ask.admin_access:
                continue
            cls = ask.device_class_name
            if cls not in mapping:
                causes.append(
                    f"request {ask.request} uses device class {cls}, "
                    "which no resources.deviceClassMappings entry maps to a resource"
                )
                continue
            if ask.all_devices:
                devices = self.all_devices(ask)
                if devices == 0:
                    causes.append(
                        f"request {ask.request} asks for all devices of class {cls}, "
                        "but no ResourceSlice has a device matching that class"
                    )
                    continue
            else:
                devices = ask.count
            per_class[cls] = per_class.get(cls, 0) + devices
        if causes:
            return f"{where}: {ident}: {', '.join(causes)}"
        for cls in sorted(per_class):
            resource = mapping[cls]
            amounts[resource] = amounts.get(resource, 0) + _device_amount(resource, per_class[cls])
        return ""


__all__ = [
    "DRA_KINDS",
    "Counted",
    "DraState",
    "required_drivers",
    "validate_claim_spec",
    "validate_resource_claim",
    "validate_resource_claim_template",
]
