"""docs/aws.md's "Bad nodes" says what the code does: the taint the launcher sets and how to clear it, the add-on's
name, the config switch, and the repair's wait times as infra/gpu_nodes.py cites them."""

from __future__ import annotations

from infra.addons import NODE_MONITORING_AGENT
from stack.paths import PROJECT_ROOT as ROOT
from trainer.base.pod.bad_node import BAD_NODE_TAINT_EFFECT, BAD_NODE_TAINT_KEY
from trainer.base.pod.exits import EXIT_BAD_NODE

AWS_DOC = " ".join((ROOT / "docs" / "aws.md").read_text().split())
SECTION = AWS_DOC[AWS_DOC.index("## Bad nodes") : AWS_DOC.index("## An existing cluster")]


def test_the_section_names_the_taint_and_how_to_clear_it() -> None:
    assert f"{BAD_NODE_TAINT_KEY}=<reason>:{BAD_NODE_TAINT_EFFECT}" in SECTION
    assert f"kubectl taint nodes <node> {BAD_NODE_TAINT_KEY}-" in SECTION
    assert f"exit {EXIT_BAD_NODE}" in SECTION or f"{EXIT_BAD_NODE} (`EXIT_BAD_NODE`)" in SECTION


def test_the_section_names_the_add_on_the_switch_and_the_repair_waits() -> None:
    for fact in (f"`{NODE_MONITORING_AGENT.name}`", "`gpuNodes.autoRepair`", "10 minutes", "30 minutes", "dcgmAgent"):
        assert fact in AWS_DOC, fact
    assert "does **not** act on a taint" in SECTION
