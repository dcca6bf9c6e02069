"""The layering of docs/architecture.md, read from the code's own imports (every import statement, also those inside
functions): no module imports a layer above its own, no two modules import each other through any path, and the
layers a Pulumi program, the policy pack or the local run load never pull in torch. The trainer's modules that those
layers load say so (`TORCH_FREE = True`), and a module that says so never pulls in torch."""

from __future__ import annotations

import ast

import pytest

from stack.paths import PROJECT_ROOT
from tests.harness.import_graph import MODULES, PACKAGES, package_of, project_imports, reachable, third_party

# Lowest first. A package may import its own layer's package and every package of a lower layer; packages that
# share a layer do not import each other.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"trainer"}),  # the trainer; its torch-free modules (presets, hardware, plan, flags) serve all above
    frozenset({"sizing"}),  # instance catalog, memory, throughput and storage models
    frozenset({"stack"}),  # the stack's config, its checks and the fit check, names, versions, paths
    frozenset({"infra", "policy"}),  # AWS components; the policy pack
    frozenset({"workloads"}),  # Kubernetes side: the platform and the job
    # the local run, pipeline tools, CI roles, benchmarks, the checks a user runs before pulumi up
    frozenset({"local", "tools", "ci", "bench", "preflight", "__main__"}),
)
# Third-party packages that the layers above the trainer must never load: the program, the pack and the local run
# install without them (requirements.txt, policy/requirements.txt).
HEAVY = frozenset({"torch", "transformers"})
TORCH_FREE_PACKAGES = frozenset(
    {"sizing", "stack", "infra", "policy", "workloads", "local", "tools", "ci", "preflight"}
)


def layer_of(package: str) -> int:
    return next(index for index, layer in enumerate(LAYERS) if package in layer)


def test_every_module_belongs_to_a_layer() -> None:
    assert frozenset().union(*LAYERS) == PACKAGES
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


@pytest.mark.parametrize("module", sorted(m for m in MODULES if package_of(m) in TORCH_FREE_PACKAGES))
def test_the_layers_above_the_trainer_never_load_torch(module: str) -> None:
    """Through any chain of imports, the trainer's torch-free modules included."""
    heavy = {(source, name) for source in reachable(module) for name in third_party(source) & HEAVY}
    assert not heavy, f"{module} loads {sorted(heavy)}"


def marked_torch_free(module: str) -> bool:
    """Whether the module says `TORCH_FREE = True` at its top level."""
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "TORCH_FREE" for target in node.targets)
        and isinstance(node.value, ast.Constant)
        and node.value.value is True
        for node in ast.parse(MODULES[module].read_text()).body
    )


def trainer_modules_loaded_above() -> set[str]:
    """The trainer's modules that a torch-free layer loads through any chain of imports (bench/ drives the trainer on
    torch and is not one of them); packages' __init__ files aside: they hold their docstrings only, and the test above
    follows the chains through them."""
    return {
        loaded
        for module in MODULES
        if package_of(module) in TORCH_FREE_PACKAGES
        for loaded in reachable(module)
        if package_of(loaded) == "trainer" and MODULES[loaded].name != "__init__.py"
    }


@pytest.mark.parametrize("module", sorted(trainer_modules_loaded_above()))
def test_the_trainer_modules_the_layers_above_load_are_marked_torch_free(module: str) -> None:
    """So that whoever edits one sees, in the module itself, that it must stay without torch."""
    assert marked_torch_free(module), f"{MODULES[module]} is loaded above the trainer: mark it `TORCH_FREE = True`"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if package_of(m) == "trainer" and marked_torch_free(m)))
def test_a_module_marked_torch_free_never_loads_torch(module: str) -> None:
    """Through any chain of imports, at module level or in functions."""
    heavy = {(source, name) for source in reachable(module) for name in third_party(source) & HEAVY}
    assert not heavy, f"{module} is marked TORCH_FREE but loads {sorted(heavy)}"


def test_the_checks_see_the_import_graph() -> None:
    """The graph the checks walk is the real one: known edges of each layer are in it."""
    assert "sizing.catalog" in project_imports("stack.config")
    assert "stack.parse" in project_imports("stack.pulumi_config")
    assert "trainer.launch.exits" in project_imports("workloads.job.pytorchjob")
    assert "workloads.job.component" in project_imports("__main__")
    assert "torch" in third_party("trainer.model.build")
    assert {"trainer.config", "trainer.launch.exits", "trainer.model.presets"} <= trainer_modules_loaded_above()
    assert marked_torch_free("trainer.config") and not marked_torch_free("trainer.model.build")


@pytest.mark.parametrize("doc", ["README.md", "docs/architecture.md"])
def test_the_maps_name_every_package(doc: str) -> None:
    """README's layout table and docs/architecture.md's package table list every package there is."""
    text = (PROJECT_ROOT / doc).read_text()
    missing = sorted(p for p in PACKAGES if f"`{p}/`" not in text and f"`{p}.py`" not in text)
    assert not missing, f"{doc} does not name {missing}"
