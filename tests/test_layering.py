"""The layering of docs/architecture.md, read from the code's own imports (every import statement, also those inside
functions): no module imports a layer above its own, no two modules import each other through any path, and the
layers a Pulumi program, the policy pack or the local run load never pull in torch."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from stack.paths import PROJECT_ROOT

# Lowest first. A package may import its own layer's package and every package of a lower layer; packages that
# share a layer do not import each other.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"trainer"}),  # the trainer; its torch-free modules (presets, hardware, plan, flags) serve all above
    frozenset({"sizing"}),  # instance catalog, memory, throughput and storage models
    frozenset({"stack"}),  # the stack's config, its checks and the fit check, names, versions, paths
    frozenset({"infra", "policy"}),  # AWS components; the policy pack
    frozenset({"workloads"}),  # Kubernetes side: the platform and the job
    frozenset({"local", "tools", "ci", "bench", "__main__"}),  # the local run, pipeline tools, CI roles, benchmarks
)
PACKAGES = frozenset().union(*LAYERS)
# Third-party packages that the layers above the trainer must never load: the program, the pack and the local run
# install without them (requirements.txt, policy/requirements.txt).
HEAVY = frozenset({"torch", "transformers"})
TORCH_FREE_PACKAGES = frozenset({"sizing", "stack", "infra", "policy", "workloads", "local", "tools", "ci"})
SKIPPED_DIRS = frozenset({".venv", "venv", ".git", "tests", "__pycache__"})


def layer_of(package: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if package in layer)


def module_files() -> dict[str, Path]:
    """Every project module outside tests/, by dotted name (the package's __init__ by the package's name)."""
    modules = {}
    for path in sorted(PROJECT_ROOT.rglob("*.py")):
        relative = path.relative_to(PROJECT_ROOT)
        if SKIPPED_DIRS & set(relative.parts) or relative.parts[0].startswith("."):
            continue
        parts = relative.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


MODULES = module_files()


def imported_names(path: Path) -> Iterator[str]:
    """Every module name an import statement of the file names (relative imports resolved)."""
    package = path.relative_to(PROJECT_ROOT).parent.parts
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            yield module
            # `from package import module` imports the module.
            yield from (f"{module}.{alias.name}" for alias in node.names if f"{module}.{alias.name}" in MODULES)


@cache
def project_imports(module: str) -> frozenset[str]:
    """The project modules `module` imports directly. Importing a.b.c runs a/__init__.py and a/b/__init__.py too, so
    they count, except the packages `module` itself lies in (Python has run them already: no circle)."""
    own_packages = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
    found = set()
    for name in imported_names(MODULES[module]):
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            prefix = ".".join(parts[:end])
            if prefix in MODULES and prefix not in own_packages:
                found.add(prefix)
    return frozenset(found)


@cache
def third_party(module: str) -> frozenset[str]:
    return frozenset(
        name.split(".")[0] for name in imported_names(MODULES[module]) if name.split(".")[0] not in PACKAGES
    )


def package_of(module: str) -> str:
    return module.split(".")[0]


def test_every_module_belongs_to_a_layer() -> None:
    assert {package_of(module) for module in MODULES} <= PACKAGES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_higher_layer_or_a_neighbour(module: str) -> None:
    own = package_of(module)
    wrong = sorted(
        imported
        for imported in project_imports(module)
        if package_of(imported) != own and layer_of(package_of(imported)) >= layer_of(own)
    )
    assert not wrong, f"{module} ({own}, layer {layer_of(own)}) imports {wrong}: not below it"


def import_cycle() -> list[str] | None:
    """One cycle in the graph of module imports, or None (depth-first search with colours)."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        stack.append(module)
        for imported in sorted(project_imports(module)):
            if state.get(imported) == "open":
                return [*stack[stack.index(imported) :], imported]
            if imported not in state and (cycle := visit(imported)):
                return cycle
        stack.pop()
        state[module] = "done"
        return None

    for module in sorted(MODULES):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_no_module_imports_itself_through_others() -> None:
    cycle = import_cycle()
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def reachable(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(project_imports(current))
    return seen


@pytest.mark.parametrize("module", sorted(m for m in MODULES if package_of(m) in TORCH_FREE_PACKAGES))
def test_the_layers_above_the_trainer_never_load_torch(module: str) -> None:
    """Through any chain of imports, the trainer's torch-free modules included."""
    heavy = {(source, name) for source in reachable(module) for name in third_party(source) & HEAVY}
    assert not heavy, f"{module} loads {sorted(heavy)}"


def test_the_checks_see_the_import_graph() -> None:
    """The graph the checks walk is the real one: known edges of each layer are in it."""
    assert "sizing.catalog" in project_imports("stack.config")
    assert "stack.parse" in project_imports("stack.pulumi_config")
    assert "trainer.launch_exits" in project_imports("workloads.job.manifest")
    assert "workloads.job.component" in project_imports("__main__")
    assert "torch" in third_party("trainer.model")
