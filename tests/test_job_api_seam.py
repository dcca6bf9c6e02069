"""One seam per job API in every layer that tells the APIs apart: the rendering (workloads/job/api.py), the policy
pack's readers (policy/jobs/registry.py) and the local run (local/apis.py). Each API's code lives in its own module or
folder per layer; only the registries import it, and no module outside an API's own code names the API. A third API
is then one module or folder per layer and a line in each registry; these tests fail until all three exist.

Read from the code's own imports (tests/harness/import_graph.py), as tests/test_layering.py reads the layers."""

from __future__ import annotations

import ast

from local.apis import LOCAL_APIS
from local.cli import parse_args
from local.drills.base import Drill
from local.drills.registry import DRILLS
from policy.jobs.registry import JOB_READERS
from stack.job_api import JOB_APIS, PYTORCHJOB, TRAINJOB
from tests.harness.import_graph import MODULES, project_imports
from workloads.job.api import job_api_for

# Each API's own code, by module prefix, in each layer that has some.
API_CODE = {
    PYTORCHJOB: ("workloads.job.pytorchjob", "policy.jobs.pytorchjob", "local.pytorchjob"),
    TRAINJOB: ("workloads.job.trainjob", "policy.jobs.trainjob", "local.trainjob"),
}
REGISTRIES = frozenset({"workloads.job.api", "policy.jobs.registry", "local.apis"})
# The names of the APIs themselves (stack/job_api.py): whoever imports one tells the APIs apart.
API_NAMES = frozenset({"PYTORCHJOB", "TRAINJOB"})


def api_of(module: str) -> str | None:
    """The API whose own code `module` is, or None for code every API shares."""
    return next(
        (api for api, prefixes in API_CODE.items() if any(module == p or module.startswith(f"{p}.") for p in prefixes)),
        None,
    )


def test_every_api_has_its_code_in_every_layer() -> None:
    assert set(API_CODE) == set(JOB_APIS)
    for prefixes in API_CODE.values():
        for prefix in prefixes:
            assert any(module == prefix or module.startswith(f"{prefix}.") for module in MODULES), prefix


def test_every_registry_holds_every_api_and_only_those() -> None:
    assert [job_api_for(api).name for api in JOB_APIS] == list(JOB_APIS)
    assert tuple(LOCAL_APIS) == JOB_APIS
    assert tuple(reader.name for reader in JOB_READERS) == JOB_APIS


def test_only_a_registry_or_the_same_apis_code_imports_an_apis_code() -> None:
    wrong = sorted(
        f"{module} imports {imported}"
        for module in MODULES
        if module not in REGISTRIES
        for imported in project_imports(module)
        if (api := api_of(imported)) is not None and api != api_of(module)
    )
    assert not wrong, f"another API's code, reached only through its layer's registry: {wrong}"


def names_imported_from_job_api(module: str) -> set[str]:
    tree = ast.parse(MODULES[module].read_text())
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "stack.job_api"
        for alias in node.names
    }


def test_code_every_api_shares_never_names_an_api() -> None:
    """It asks its layer's registry for the API's part instead of comparing job.api itself."""
    shared = [m for m in MODULES if api_of(m) is None and m not in REGISTRIES]
    named = {m: sorted(names) for m in shared if (names := names_imported_from_job_api(m) & API_NAMES)}
    assert not named, f"these import an API's name from stack.job_api, so branch on which API the job is: {named}"


def test_the_checks_see_the_api_code() -> None:
    assert api_of("local.trainjob.pods") == TRAINJOB and api_of("policy.jobs.pytorchjob") == PYTORCHJOB
    assert api_of("local.run") is None
    assert "local.pytorchjob.api" in project_imports("local.apis")
    assert names_imported_from_job_api("local.pytorchjob.api") >= {"PYTORCHJOB"}


def drill_classes() -> set[type[Drill]]:
    """Every concrete drill class the drills package defines."""
    found: set[type[Drill]] = set()
    pending: list[type[Drill]] = [Drill]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if not getattr(sub, "__abstractmethods__", None):
                found.add(sub)
    return found


def test_every_drill_class_is_registered_under_its_name() -> None:
    assert set(DRILLS.values()) == drill_classes()
    assert all(name == drill.name for name, drill in DRILLS.items())


def test_each_apis_local_run_takes_registered_drills_and_the_cli_offers_them_all() -> None:
    for api in LOCAL_APIS.values():
        assert set(api.drills) <= set(DRILLS.values()), api.name
    for name in DRILLS:
        assert parse_args(["--drill", name]).drill == name
