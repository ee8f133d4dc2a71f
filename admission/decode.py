"""Turn a raw manifest into a typed API object, or into the errors that keep it out.

This is the only door into the engine for user input, so every failure here
becomes a :class:`FieldError` naming the field and what would be accepted.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import orjson
from pydantic import AliasChoices, BaseModel, ValidationError

from kueuestream.admission import dra
from kueuestream.admission import validation as v
from kueuestream.admission.api.base import ApiModel
from kueuestream.admission.api.batch import Job
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.core import LimitRange, Namespace, RuntimeClass
from kueuestream.admission.api.dra import (
    RESOURCE_VERSIONS,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kueuestream.admission.api.kueue import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
)
from kueuestream.admission.api.multikueue import MultiKueueCluster, MultiKueueConfig
from kueuestream.admission.api.scheduling import PriorityClass
from kueuestream.admission.errors import FieldError, join_path
from kueuestream.admission.multikueue.validation import (
    validate_multikueue_cluster,
    validate_multikueue_config,
)
from kueuestream.admission.names import metadata_errors
from kueuestream.admission.strict_yaml import YamlProblem, load_one

KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2")
CONFIG_VERSIONS = ("config.kueue.x-k8s.io/v1beta1", "config.kueue.x-k8s.io/v1beta2")
# Kueue's own API groups. A kind in them is either one Kueuestream reads, one of
# Kueue's that it does not (valid, none of its business), or a mistake.
KUEUE_GROUPS = ("kueue.x-k8s.io", "config.kueue.x-k8s.io")
UNREAD_KUEUE_KINDS = frozenset({"ProvisioningRequestConfig", "Topology"})

Validator = Callable[[Any], list[FieldError]]


@dataclass(frozen=True, slots=True)
class Kind:
    model: type[ApiModel]
    api_versions: tuple[str, ...]
    namespaced: bool
    validate: Validator | None = None
    # The API server's rule for metadata.name: a DNS-1123 subdomain unless this is set.
    name_is_label: bool = False


KINDS: dict[str, Kind] = {
    "ResourceFlavor": Kind(ResourceFlavor, KUEUE_VERSIONS, False, v.validate_resource_flavor),
    "AdmissionCheck": Kind(AdmissionCheck, KUEUE_VERSIONS, False, v.validate_admission_check),
    "ClusterQueue": Kind(ClusterQueue, KUEUE_VERSIONS, False, v.validate_cluster_queue),
    "Cohort": Kind(Cohort, (*KUEUE_VERSIONS, "kueue.x-k8s.io/v1alpha1"), False, v.validate_cohort),
    "LocalQueue": Kind(LocalQueue, KUEUE_VERSIONS, True, v.validate_local_queue),
    "Workload": Kind(Workload, KUEUE_VERSIONS, True, v.validate_workload),
    "WorkloadPriorityClass": Kind(WorkloadPriorityClass, KUEUE_VERSIONS, namespaced=False),
    "Configuration": Kind(Configuration, CONFIG_VERSIONS, False, v.validate_configuration),
    "MultiKueueConfig": Kind(MultiKueueConfig, KUEUE_VERSIONS, False, validate_multikueue_config),
    "MultiKueueCluster": Kind(MultiKueueCluster, KUEUE_VERSIONS, False, validate_multikueue_cluster),
    "Namespace": Kind(Namespace, ("v1",), namespaced=False, name_is_label=True),
    "Job": Kind(Job, ("batch/v1",), True, v.validate_job),
    "PriorityClass": Kind(PriorityClass, ("scheduling.k8s.io/v1",), namespaced=False),
    "LimitRange": Kind(LimitRange, ("v1",), True, v.validate_limit_range),
    "RuntimeClass": Kind(RuntimeClass, ("node.k8s.io/v1",), False, v.validate_runtime_class),
    "ResourceClaimTemplate": Kind(
        ResourceClaimTemplate, RESOURCE_VERSIONS, True, dra.validate_resource_claim_template
    ),
    "ResourceClaim": Kind(ResourceClaim, RESOURCE_VERSIONS, True, dra.validate_resource_claim),
    "DeviceClass": Kind(DeviceClass, RESOURCE_VERSIONS, namespaced=False),
    "ResourceSlice": Kind(ResourceSlice, RESOURCE_VERSIONS, namespaced=False),
}


def register_kind(kind: str, spec: Kind) -> None:
    KINDS[kind] = spec


@dataclass(slots=True)
class Decoded:
    """The outcome of decoding one manifest: the object, or why it was refused."""

    kind: str
    namespace: str
    name: str
    obj: ApiModel | None = None
    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # False for manifests that are valid but not ours (a Service, a Deployment).
    relevant: bool = True

    @property
    def label(self) -> str:
        ident = f"{self.namespace}/{self.name}" if self.namespace else self.name
        if not ident and self.kind == "Configuration":
            return self.kind  # a Configuration has no name of its own; there is only one
        if not ident.isprintable():
            ident = repr(ident)  # a NUL or a line break would garble the one-line report
        return f"{self.kind or '<no kind>'} {ident or '<no name>'}"

    def copy(self) -> Decoded:
        """The same outcome with lists of its own (what ``dataclasses.replace`` makes, four times faster)."""
        return Decoded(
            self.kind,
            self.namespace,
            self.name,
            self.obj,
            list(self.errors),
            list(self.warnings),
            self.relevant,
        )


def _describe(err: Mapping[str, Any]) -> str:
    kind = err["type"]
    given = err.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"unsupported value {given!r}; accepted values: {expected}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected an integer, got {given!r}"
    if kind in ("bool_parsing", "bool_type"):
        return f"expected true or false, got {given!r}"
    if kind == "dict_type":
        return f"expected a map of key: value pairs, got {type(given).__name__}"
    if kind in ("model_type", "model_attributes_type"):
        return f"expected an object (a mapping of fields), got {type(given).__name__}"
    if kind == "list_type":
        return f"expected a list, got {type(given).__name__}"
    if kind in ("string_type",):
        return f"expected a string, got {type(given).__name__} {given!r}"
    message = str(err.get("msg", "invalid value"))
    return message.removeprefix("Value error, ")


def _unwrap(tp: Any) -> Any:
    """The type under ``Annotated[...]`` and ``X | None``."""
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _field_type(model: type[BaseModel], key: str) -> Any:
    for name, info in model.model_fields.items():
        choices = info.validation_alias.choices if isinstance(info.validation_alias, AliasChoices) else []
        if key in (name, info.alias, info.validation_alias) or key in choices:
            return info.annotation
    return None


def _field_path(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """Kubernetes' field path: ``requests[cpu]`` for a map key, ``.name`` for a field.

    pydantic's loc does not tell a field from a map key, so walk the model's types.
    """
    out = ""
    tp: Any = model
    for part in loc:
        tp = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(part, str):
            out += f".{part}" if out else part
            tp = _field_type(tp, part)
        elif get_origin(tp) is dict and isinstance(part, str):
            out += f"[{part}]"
            tp = get_args(tp)[1]
        elif get_origin(tp) is list and isinstance(part, int):
            out += f"[{part}]"
            tp = get_args(tp)[0]
        else:
            out = join_path(out, part) if out else join_path(part)
            tp = None
    return out


def _pydantic_errors(error: ValidationError, model: type[BaseModel]) -> list[FieldError]:
    out: list[FieldError] = []
    for err in error.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        out.append(FieldError(_field_path(model, loc), _describe(err)))
    return out


def _config_from_configmap(manifest: Mapping[str, Any]) -> tuple[str, Any] | None:
    """Kueue reads its Configuration from a ConfigMap's data; so do we."""
    data = manifest.get("data")
    if not isinstance(data, Mapping):
        return None
    for key in sorted(data):
        text = data[key]
        if not isinstance(text, str) or "Configuration" not in text:
            continue
        try:
            inner = load_one(text)
        except YamlProblem:
            return key, None
        if isinstance(inner, Mapping) and inner.get("kind") == "Configuration":
            return key, inner
    return None


def _kind_problem(kind: str, api_version: Any) -> Decoded | None:
    """For a kind Kueuestream does not read: an error if it is a mistake, else "not ours"."""
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    if group not in KUEUE_GROUPS or kind in UNREAD_KUEUE_KINDS:
        return None
    known = sorted(
        {k for k, spec in KINDS.items() if any(v.startswith(f"{group}/") for v in spec.api_versions)}
        | (UNREAD_KUEUE_KINDS if group == "kueue.x-k8s.io" else set())
    )
    return Decoded(
        kind,
        "",
        "",
        errors=[
            FieldError(
                "kind", f"unknown kind {kind!r} in {api_version}; the kinds of {group} are {', '.join(known)}"
            )
        ],
    )


def is_relevant(manifest: Any) -> bool:
    """False for what :func:`decode` would call not relevant: valid, of a kind Kueuestream does not read.

    Cheaper than decoding: only the kind, the apiVersion and, for a ConfigMap,
    whether it carries a Configuration are looked at.
    """
    if not isinstance(manifest, Mapping):
        return True
    kind, api_version = manifest.get("kind"), manifest.get("apiVersion")
    if not isinstance(kind, str) or not kind or not isinstance(api_version, str) or not api_version:
        return True
    if kind == "ConfigMap" and api_version == "v1":
        return _config_from_configmap(manifest) is not None
    return kind in KINDS or _kind_problem(kind, api_version) is not None


# The embedded pipeline decodes every manifest twice in a row: ingest validates
# and routes it, then its shard's engine takes it in. The last few outcomes are
# kept, keyed by the manifest's exact JSON text. Values orjson would write like
# another's (NaN as null, a datetime or a subclass as its plain form) make
# orjson refuse or put "null" in the text, and are not kept.
_RECENT_MAX = 64
_recent_max = _RECENT_MAX
_KEY_OPTIONS = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS
)
_recent: OrderedDict[bytes, Decoded] = OrderedDict()


def decode(manifest: Any) -> Decoded:
    """The manifest's object, or the errors that keep it out (a fresh :class:`Decoded` each call)."""
    try:
        key = orjson.dumps(manifest, option=_KEY_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError: a value it does not write as JSON itself
        return _decode(manifest)
    if b"null" in key:
        return _decode(manifest)
    known = _recent.get(key)
    if known is None:
        known = _decode(manifest)
        _recent[key] = known
        if len(_recent) > _recent_max:
            _recent.popitem(last=False)
    # The object is frozen and shared; the lists a caller may change are its own.
    return known.copy()


@contextmanager
def remembering_every_outcome() -> Iterator[None]:
    """Within the block :func:`decode` keeps every outcome, not only the last few.

    For a command that decodes the same manifests in passes far apart (``admit``
    checks them all, then its pipeline takes them in one by one). Afterwards
    only the last few are kept again.
    """
    global _recent_max
    previous = _recent_max
    _recent_max = sys.maxsize
    try:
        yield
    finally:
        _recent_max = previous
        while len(_recent) > _recent_max:
            _recent.popitem(last=False)


def _decode(manifest: Any) -> Decoded:
    if not isinstance(manifest, Mapping):
        return Decoded(
            "", "", "", errors=[FieldError("", "a manifest must be a mapping with apiVersion and kind")]
        )
    kind = manifest.get("kind")
    meta = manifest.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name: str = meta["name"] if isinstance(meta.get("name"), str) else ""
    namespace: str = meta["namespace"] if isinstance(meta.get("namespace"), str) else ""
    if not isinstance(kind, str) or not kind:
        return Decoded("", namespace, name, errors=[FieldError("kind", "required field is missing")])
    api_version = manifest.get("apiVersion")
    if not isinstance(api_version, str) or not api_version:
        return Decoded(kind, namespace, name, errors=[FieldError("apiVersion", "required field is missing")])

    if kind == "ConfigMap" and api_version == "v1":
        found = _config_from_configmap(manifest)
        if found is None:
            return Decoded(kind, namespace, name, relevant=False)
        key, inner = found
        # The ConfigMap is an API object with a name of its own.
        outer = metadata_errors(kind, manifest, namespaced=True)
        if not name:
            outer.insert(0, FieldError("metadata.name", "required field is missing"))
        if inner is None:
            return Decoded(
                "Configuration",
                namespace,
                name,
                errors=[*outer, FieldError(f"data[{key}]", "is not valid YAML")],
            )
        decoded = _decode(inner)
        prefix = f"data[{key}]"
        decoded.errors = outer + [
            FieldError(f"{prefix}.{e.path}" if e.path else prefix, e.message) for e in decoded.errors
        ]
        decoded.name = decoded.name or name
        if decoded.errors:
            decoded.obj = None
        return decoded

    spec = KINDS.get(kind)
    if spec is None:
        problem = _kind_problem(kind, api_version)
        if problem is not None:
            problem.namespace, problem.name = namespace, name
            return problem
        return Decoded(kind, namespace, name, relevant=False)
    if not spec.namespaced:
        # The API server clears metadata.namespace of cluster-scoped objects.
        namespace = ""
    if api_version not in spec.api_versions:
        return Decoded(
            kind,
            namespace,
            name,
            errors=[
                FieldError(
                    "apiVersion",
                    f"unsupported apiVersion {api_version!r} for {kind}; "
                    f"accepted: {', '.join(spec.api_versions)}",
                )
            ],
        )
    errors: list[FieldError] = []
    # Only absence is reported here; a wrong type (name: 123) is the model's error.
    if kind != "Configuration" and meta.get("name") in (None, ""):
        errors.append(FieldError("metadata.name", "required field is missing"))
    if spec.namespaced and meta.get("namespace") in (None, ""):
        errors.append(FieldError("metadata.namespace", f"required: {kind} is namespaced"))
    if kind != "Configuration":  # Kueue reads its Configuration from a file, not from the API
        errors += metadata_errors(
            kind, manifest, namespaced=spec.namespaced, name_is_label=spec.name_is_label
        )
    try:
        obj = spec.model.model_validate(manifest)
    except ValidationError as err:
        model_errors = _pydantic_errors(err, spec.model)
        if errors and "metadata" not in manifest:
            # "metadata.name: required" already says it; "metadata: required" would repeat it.
            model_errors = [e for e in model_errors if e.path != "metadata"]
        return Decoded(kind, namespace, name, errors=errors + model_errors)
    if spec.validate is not None:
        errors.extend(spec.validate(obj))
    if errors:
        return Decoded(kind, namespace, name, errors=errors)
    return Decoded(kind, namespace, name, obj=obj)


def dump(obj: BaseModel) -> dict[str, Any]:
    out: dict[str, Any] = obj.model_dump(by_alias=True, exclude_none=True, mode="json")
    return out
