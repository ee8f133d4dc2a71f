"""The API server's rules for object names and namespaces, as field errors.

Kubernetes checks ``metadata.name`` with a rule chosen per kind and
``metadata.namespace`` as a DNS-1123 label (k8s.io/apimachinery:
``ValidateObjectMetaAccessor``, ``NameIsDNSSubdomain``, ``NameIsDNSLabel``,
``IsDNS1123Label``, ``IsDNS1123Subdomain``). Custom resources (every Kueue
kind), batch Jobs and the resource.k8s.io kinds use the subdomain rule,
Namespaces the label rule. A Job whose selector the API server generates
(``spec.manualSelector`` not true) also gets its name copied into the
``batch.kubernetes.io/job-name`` label of its pod template, so the name must
fit a label value too: at most 63 characters.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kueuestream.admission.errors import FieldError

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

LABEL_RULE = (
    "a DNS-1123 label: at most 63 characters, lower-case letters, digits and '-', "
    "starting and ending with a letter or digit (e.g. 'team-a')"
)
SUBDOMAIN_RULE = (
    "a DNS-1123 subdomain: at most 253 characters, lower-case letters, digits, '-' and '.', "
    "each '.'-separated part starting and ending with a letter or digit (e.g. 'train-1' or 'gpu.example.com')"
)


def is_dns1123_label(value: str) -> bool:
    # fullmatch: re's "$" would also accept a trailing newline.
    return len(value) <= DNS1123_LABEL_MAX and _LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    return len(value) <= DNS1123_SUBDOMAIN_MAX and _SUBDOMAIN.fullmatch(value) is not None


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 80 else f"{value[:60]!r}... ({len(value)} characters)"


def label_problem(value: str) -> str | None:
    if is_dns1123_label(value):
        return None
    return f"{_shown(value)} is not valid: must be {LABEL_RULE}"


def subdomain_problem(value: str) -> str | None:
    if is_dns1123_subdomain(value):
        return None
    return f"{_shown(value)} is not valid: must be {SUBDOMAIN_RULE}"


def _manual_selector(manifest: Mapping[str, Any]) -> bool:
    spec = manifest.get("spec")
    return isinstance(spec, Mapping) and spec.get("manualSelector") is True


def metadata_errors(
    kind: str, manifest: Mapping[str, Any], *, namespaced: bool, name_is_label: bool = False
) -> list[FieldError]:
    """What is wrong with the object's name and namespace, if they are strings.

    Absence and wrong types are reported elsewhere (``required``, ``expected a string``).
    """
    meta = manifest.get("metadata")
    if not isinstance(meta, Mapping):
        return []
    errors: list[FieldError] = []
    name = meta.get("name")
    if isinstance(name, str) and name:
        problem = label_problem(name) if name_is_label else subdomain_problem(name)
        if (
            problem is None
            and kind == "Job"
            and len(name) > LABEL_VALUE_MAX
            and not _manual_selector(manifest)
        ):
            problem = (
                f"{_shown(name)} is too long for a Job: at most {LABEL_VALUE_MAX} characters, because the "
                "API server copies the name into the batch.kubernetes.io/job-name label of the pod "
                "template (unless spec.manualSelector is true)"
            )
        if problem is not None:
            errors.append(FieldError("metadata.name", problem))
    namespace = meta.get("namespace")
    if namespaced and isinstance(namespace, str) and namespace:
        problem = label_problem(namespace)
        if problem is not None:
            errors.append(FieldError("metadata.namespace", problem))
    return errors
