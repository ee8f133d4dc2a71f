"""resource.k8s.io objects (DRA): ResourceClaimTemplate, ResourceClaim, DeviceClass, ResourceSlice.

Read from v1alpha3, v1beta1, v1beta2 and v1 alike. The versions differ in the
shape of a device request:

- v1alpha3 and v1beta1 ("flat"): ``deviceClassName``, ``selectors``,
  ``allocationMode``, ``count`` and ``adminAccess`` sit on the request itself;
  ``firstAvailable`` (KEP-4816) replaces all of them with a list of subrequests.
- v1beta2 and v1: the request holds either ``exactly`` (those same fields) or
  ``firstAvailable``.

One model reads both shapes; :func:`is_flat` tells which one an object's
apiVersion uses, and :meth:`ResourceClaimSpec.device_asks` turns a request list
into the device asks admission counts, whatever the version. The checks that a
request has a shape Kubernetes would accept are in ``kueuestream.admission.dra``.

ResourceSlices differ too (v1alpha3/v1beta1 wrap a device's fields in
``basic``), but admission only counts a slice's devices, which every version
lists under ``spec.devices``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from kueuestream.admission.api.base import ApiModel, ObjectMeta, Str

RESOURCE_GROUP = "resource.k8s.io"
FLAT_VERSIONS = (f"{RESOURCE_GROUP}/v1alpha3", f"{RESOURCE_GROUP}/v1beta1")
NESTED_VERSIONS = (f"{RESOURCE_GROUP}/v1beta2", f"{RESOURCE_GROUP}/v1")
RESOURCE_VERSIONS = (*FLAT_VERSIONS, *NESTED_VERSIONS)

EXACT_COUNT = "ExactCount"
ALL = "All"
ALLOCATION_MODES = (EXACT_COUNT, ALL)
MAX_SUBREQUESTS = 8


def is_flat(api_version: str) -> bool:
    """True for the versions whose requests carry deviceClassName themselves."""
    return api_version in FLAT_VERSIONS


class CELDeviceSelector(ApiModel):
    expression: Str = ""


class DeviceSelector(ApiModel):
    cel: CELDeviceSelector | None = None


def _expressions(selectors: list[DeviceSelector] | None) -> tuple[str, ...]:
    return tuple(s.cel.expression for s in selectors or [] if s.cel is not None)


class ExactDeviceRequest(ApiModel):
    """v1beta2/v1 ``requests[].exactly``."""

    device_class_name: Str | None = None
    selectors: list[DeviceSelector] | None = None
    allocation_mode: Str | None = None
    count: int | None = None
    admin_access: bool | None = None


class DeviceSubRequest(ExactDeviceRequest):
    """One alternative of ``requests[].firstAvailable``.

    ``adminAccess`` (inherited) and ``firstAvailable`` are not fields of a
    subrequest in any version; they are read only so that they can be refused.
    """

    name: Str = ""
    first_available: list[Any] | None = None


class DeviceRequest(ExactDeviceRequest):
    """``spec.devices.requests[]`` in any version: the flat fields (v1alpha3 / v1beta1,
    inherited) and the nested ones."""

    name: Str = ""
    # v1beta2 / v1.
    exactly: ExactDeviceRequest | None = None
    # Every version (KEP-4816).
    first_available: list[DeviceSubRequest] | None = None


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """What one request (or one firstAvailable alternative) asks for, version-free.

    ``request`` is the name Kubernetes reports an allocation under:
    ``gpu`` for a request, ``gpu/small-gpu`` for one of its alternatives.
    """

    request: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    all_devices: bool = False
    count: int = 1
    admin_access: bool = False


def _ask(
    request: str,
    device_class_name: str | None,
    selectors: list[DeviceSelector] | None,
    allocation_mode: str | None,
    count: int | None,
    admin_access: bool | None,
) -> DeviceAsk:
    all_devices = allocation_mode == ALL
    return DeviceAsk(
        request=request,
        device_class_name=device_class_name or "",
        selectors=_expressions(selectors),
        all_devices=all_devices,
        # ExactCount without a count asks for one device.
        count=0 if all_devices else (1 if count is None else count),
        admin_access=bool(admin_access),
    )


class DeviceClaim(ApiModel):
    requests: list[DeviceRequest] = Field(default_factory=list)


class ResourceClaimSpec(ApiModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)

    def device_asks(self, flat: bool) -> tuple[DeviceAsk, ...]:
        """Every device ask of the claim, alternatives included, in request order.

        Assumes the shape was validated; fields of the other shape are ignored,
        as the API server prunes fields a version does not have.
        """
        out: list[DeviceAsk] = []
        for i, req in enumerate(self.devices.requests):
            name = req.name or f"requests[{i}]"
            if req.first_available:
                for j, sub in enumerate(req.first_available):
                    sub_name = f"{name}/{sub.name or f'firstAvailable[{j}]'}"
                    out.append(
                        _ask(
                            sub_name,
                            sub.device_class_name,
                            sub.selectors,
                            sub.allocation_mode,
                            sub.count,
                            None,
                        )
                    )
            elif flat:
                out.append(
                    _ask(
                        name,
                        req.device_class_name,
                        req.selectors,
                        req.allocation_mode,
                        req.count,
                        req.admin_access,
                    )
                )
            elif req.exactly is not None:
                ex = req.exactly
                out.append(
                    _ask(
                        name,
                        ex.device_class_name,
                        ex.selectors,
                        ex.allocation_mode,
                        ex.count,
                        ex.admin_access,
                    )
                )
        return tuple(out)


class ResourceClaimTemplateSpec(ApiModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(ApiModel):
    api_version: Str
    kind: Literal["ResourceClaimTemplate"]
    metadata: ObjectMeta
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)

    def device_asks(self) -> tuple[DeviceAsk, ...]:
        return self.spec.spec.device_asks(is_flat(self.api_version))


class ResourceClaim(ApiModel):
    api_version: Str
    kind: Literal["ResourceClaim"]
    metadata: ObjectMeta
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)

    def device_asks(self) -> tuple[DeviceAsk, ...]:
        return self.spec.device_asks(is_flat(self.api_version))


class DeviceClassSpec(ApiModel):
    selectors: list[DeviceSelector] = Field(default_factory=list)


class DeviceClass(ApiModel):
    api_version: Str
    kind: Literal["DeviceClass"]
    metadata: ObjectMeta
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)

    def expressions(self) -> tuple[str, ...]:
        return _expressions(self.spec.selectors)


class ResourcePool(ApiModel):
    name: Str = ""
    generation: int = 0
    resource_slice_count: int | None = None


class Device(ApiModel):
    # Attributes, capacities and counters (flat in v1beta2/v1, under `basic` before)
    # are not read: admission counts devices, it does not allocate them.
    name: Str = ""


class ResourceSliceSpec(ApiModel):
    driver: Str = ""
    pool: ResourcePool = Field(default_factory=ResourcePool)
    node_name: Str | None = None
    all_nodes: bool | None = None
    devices: list[Device] = Field(default_factory=list)


class ResourceSlice(ApiModel):
    api_version: Str
    kind: Literal["ResourceSlice"]
    metadata: ObjectMeta
    spec: ResourceSliceSpec = Field(default_factory=ResourceSliceSpec)


__all__ = [
    "ALL",
    "ALLOCATION_MODES",
    "EXACT_COUNT",
    "MAX_SUBREQUESTS",
    "RESOURCE_VERSIONS",
    "DeviceAsk",
    "DeviceClass",
    "DeviceRequest",
    "DeviceSubRequest",
    "ExactDeviceRequest",
    "ResourceClaim",
    "ResourceClaimSpec",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "is_flat",
]
