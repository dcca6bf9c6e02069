"""The pinned Python SDKs' own description of a resource type: its class, its `*Args` input type, the names its
inputs travel under on the wire, and the outputs only the provider computes.

Everything comes from the installed SDKs: the resource modules each SDK registers with the Pulumi runtime
(`_utilities.register`, token -> class), the `@pulumi.input_type` Args classes and their getters' wire names
(pulumi._types), and each resource's `_internal_init`, which sets every provider-computed output to None.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import warnings
from types import ModuleType
from typing import Any

from pulumi.runtime import rpc

# Provider resources: "pulumi:providers:<package>" -> the package's Provider class.
PROVIDER_MODULES = {
    "kubernetes": "pulumi_kubernetes",
    "aws": "pulumi_aws",
    "random": "pulumi_random",
    "eks": "pulumi_eks",
    "docker-build": "pulumi_docker_build",
}
_COMPUTED = re.compile(r'__props__\.__dict__\["(\w+)"\] = None')


def _import(module: str, attribute: str | None = None) -> Any:
    """An SDK module (or one of its attributes), without the deprecation warnings some generated modules raise when
    they load (pulumi-eks's NodeGroup, pulumi-aws's ec2.EncryptionControl): they are about classes the program does
    not use. The SDKs load their modules lazily, on first attribute access, so that is inside the guard too."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loaded: ModuleType = importlib.import_module(module)
        return loaded if attribute is None else getattr(loaded, attribute, None)


for _package in PROVIDER_MODULES.values():
    _import(_package)  # importing an SDK registers its resource modules with the runtime


@functools.cache
def _token_classes() -> dict[str, tuple[str, str]]:
    found: dict[str, tuple[str, str]] = {}
    for modules in rpc._RESOURCE_MODULES.values():
        for module in modules:
            info = getattr(module, "mod_info", None)
            if info:
                for token, class_name in info["classes"].items():
                    found[token] = (info["fqn"], class_name)
    return found


def resource_class(type_token: str) -> type | None:
    """The SDK class registered for `type_token`, or None for types no SDK declares (a Kubernetes custom
    resource such as a PyTorchJob, the project's own components)."""
    if type_token.startswith("pulumi:providers:"):
        package = PROVIDER_MODULES.get(type_token.rsplit(":", 1)[1])
        return _import(package, "Provider") if package else None
    entry = _token_classes().get(type_token)
    if entry is None:
        return None
    module, class_name = entry
    return _import(module, class_name)


def args_class(type_token: str) -> type | None:
    """The `*Args` input type of `type_token`'s class, from the class's own module: `<Class>InitArgs` where the
    package has a nested type of the name `<Class>Args` already (pulumi-aws s3/bucket_versioning.py exports
    BucketVersioningInitArgs, as s3/_inputs.py's BucketVersioningArgs is the Bucket's `versioning` block)."""
    cls = resource_class(type_token)
    if cls is None:
        return None
    return _import(cls.__module__, f"{cls.__name__}InitArgs") or _import(cls.__module__, f"{cls.__name__}Args")


@functools.cache
def computed_outputs(type_token: str) -> tuple[str, ...]:
    """Wire names of the outputs the provider computes (no input sets them), for custom resources."""
    cls = resource_class(type_token)
    init = getattr(cls, "_internal_init", None)
    if cls is None or init is None:
        return ()
    python_names: list[str] = _COMPUTED.findall(inspect.getsource(init))
    wire = output_wire_names(cls)
    inputs = args_class(type_token)
    settable = set(wire_names(inputs)) if inputs is not None else set()
    return tuple(wire.get(name, name) for name in python_names if wire.get(name, name) not in settable)


def output_wire_names(cls: type) -> dict[str, str]:
    """Python name -> wire name for a resource class's output properties (`@pulumi.getter(name=...)`)."""
    names: dict[str, str] = {}
    for attribute, value in vars(cls).items():
        getter = getattr(value, "fget", None)
        if getter is not None:
            names[attribute] = getattr(getter, "_pulumi_name", attribute)
    return names


def wire_names(input_type: type) -> dict[str, str]:
    """Wire name -> Python name of an `@pulumi.input_type` class."""
    from pulumi import _types

    return {wire: python for python, wire in _types.input_type_py_to_pulumi_names(input_type).items()}


def input_annotations(input_type: type) -> dict[str, Any]:
    """Wire name -> the getter's full type annotation (Input/Optional wrappers kept) of an input type."""
    from pulumi import _types

    return dict(_types._raw_return_hints(input_type))
