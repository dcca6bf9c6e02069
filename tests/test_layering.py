"""The layering of docs/architecture.md, read from the code's own imports (every import statement, also those inside
functions): no module imports a layer above its own, no two modules import each other through any path, and the layers a
Pulumi program, the policy pack or the local run load never pull in torch. Inside the trainer the same rules hold
between its role folders; its torch-free base is one package, trainer/base/, which loads no torch and is all of the
trainer that the Pulumi program (__main__.py, stack/, infra/, workloads/), the sizing model, the policy pack, the CI
roles and the pipeline tools import. What the pods and the stack share (a taint, a variable's name, a key in S3) is
written there once."""

from __future__ import annotations

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


# The trainer's role folders and top-level modules, lowest first, as LAYERS above: a part may import its own modules
# and those of lower layers; parts that share a layer do not import each other.
TRAINER_LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"base"}),  # without torch: the flags and their declarations, what the layers above the trainer import
    frozenset({"dtypes", "loss_scale", "optim", "comms", "data", "launch"}),  # the loop's pieces, ranks' groups
    frozenset({"model"}),  # built on the process groups, trained on the packed data
    frozenset({"parallel", "checkpoint", "evaluation"}),  # what shards, saves and evaluates the model
    frozenset({"record", "checks"}),  # the run's record; the checks before training
    frozenset({"train", "validate"}),  # the loop; the flags' checks before any work
    frozenset({"main"}),  # one worker: validate, preflight, train
    frozenset({"stage", "__main__"}),  # the entry points
)
BASE = "trainer.base"
# What the Pulumi program, the sizing model, the policy pack, the CI roles and the pipeline tools import of the
# trainer: its base alone. The rest may import the trainer's runtime modules: local/ runs the trainer's own launcher
# and reads its checkpoints and record, preflight/ reads a data set as the trainer does, bench/ times the trainer.
# local/ and preflight/ still load no torch (test_the_layers_above_the_trainer_never_load_torch).
BASE_ONLY_PACKAGES = frozenset({"__main__", "stack", "sizing", "policy", "infra", "workloads", "ci", "tools"})


def part_of(module: str, depth: int) -> str:
    """The part of a module `depth` names in: trainer.checkpoint.load at 1 -> checkpoint, trainer.base.pod.exits at 2 ->
    pod."""
    return module.split(".")[depth]


def part_layer(layers: tuple[frozenset[str], ...], part: str) -> int:
    return next(index for index, layer in enumerate(layers) if part in layer)


def imports_not_below(module: str, modules: list[str], layers: tuple[frozenset[str], ...], depth: int) -> list[str]:
    """What `module` imports of `modules` from another part of its own layer or of a layer above."""
    own = part_of(module, depth)
    return sorted(
        imported
        for imported in project_imports(module)
        if imported in modules
        and part_of(imported, depth) != own
        and part_layer(layers, part_of(imported, depth)) >= part_layer(layers, own)
    )


TRAINER_MODULES = sorted(m for m in MODULES if package_of(m) == "trainer" and m != "trainer")


def test_every_part_of_the_trainer_belongs_to_a_layer() -> None:
    assert frozenset().union(*TRAINER_LAYERS) == {part_of(m, 1) for m in TRAINER_MODULES}


@pytest.mark.parametrize("module", TRAINER_MODULES)
def test_no_trainer_module_imports_a_part_above_it_or_a_neighbour(module: str) -> None:
    wrong = imports_not_below(module, TRAINER_MODULES, TRAINER_LAYERS, 1)
    assert not wrong, f"{module} (trainer layer {part_layer(TRAINER_LAYERS, part_of(module, 1))}) imports {wrong}"


# The base's own parts (its subpackages and its flat modules), lowest first, under the same rule as TRAINER_LAYERS.
BASE_LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "faults", "units"}),  # facts every part reads
    frozenset({"pod", "checkpoint"}),  # what the pods share with the manifests; the checkpoints' rules
    frozenset({"s3"}),  # transfers, which the launcher retries as pod/aws_retry.py says
    frozenset({"model"}),  # shapes, and where a model comes from (S3 among them)
    frozenset({"flags"}),  # the options, which name the models and read the launch environment
    frozenset({"hardware", "metrics"}),  # figures derived from the flags and the model's shape
)
BASE_MODULES = sorted(m for m in MODULES if m.startswith(f"{BASE}."))


def test_every_part_of_the_base_belongs_to_a_layer() -> None:
    assert frozenset().union(*BASE_LAYERS) == {part_of(m, 2) for m in BASE_MODULES}


@pytest.mark.parametrize("module", BASE_MODULES)
def test_no_base_module_imports_a_part_above_it_or_a_neighbour(module: str) -> None:
    wrong = imports_not_below(module, BASE_MODULES, BASE_LAYERS, 2)
    assert not wrong, f"{module} (base layer {part_layer(BASE_LAYERS, part_of(module, 2))}) imports {wrong}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m == BASE or m.startswith(f"{BASE}.")))
def test_the_trainers_base_never_loads_torch(module: str) -> None:
    """Through any chain of imports, at module level or in functions."""
    heavy = {(source, name) for source in reachable(module) for name in third_party(source) & HEAVY}
    assert not heavy, f"{module} is in trainer/base/ but loads {sorted(heavy)}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if package_of(m) in BASE_ONLY_PACKAGES))
def test_the_program_sizing_policy_ci_and_tools_import_only_the_trainers_base(module: str) -> None:
    outside = sorted(
        imported
        for imported in project_imports(module)
        if package_of(imported) == "trainer"
        and imported != "trainer"
        and not imported.startswith(f"{BASE}.")
        and imported != BASE
    )
    assert not outside, f"{module} imports {outside}: move what it needs into trainer/base/"


def test_the_checks_see_the_import_graph() -> None:
    """The graph the checks walk is the real one: known edges of each layer are in it."""
    assert "sizing.catalog" in project_imports("stack.config")
    assert "stack.parse" in project_imports("stack.pulumi_config")
    assert "trainer.base.pod.exits" in project_imports("workloads.job.pytorchjob")
    assert "workloads.job.component" in project_imports("__main__")
    assert "torch" in third_party("trainer.model.build")
    assert "trainer.base.checkpoint.space" in project_imports("sizing.fsx")
    assert "trainer.comms.distributed" in project_imports("trainer.model.build")


@pytest.mark.parametrize("doc", ["README.md", "docs/architecture.md"])
def test_the_maps_name_every_package(doc: str) -> None:
    """README's layout table and docs/architecture.md's package table list every package there is."""
    text = (PROJECT_ROOT / doc).read_text()
    missing = sorted(p for p in PACKAGES if f"`{p}/`" not in text and f"`{p}.py`" not in text)
    assert not missing, f"{doc} does not name {missing}"
