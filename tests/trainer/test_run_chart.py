"""The run's chart as SVG: valid XML, a point per logged step on the right scale, a change of world size marked."""

from __future__ import annotations

from xml.etree import ElementTree

from trainer.record.chart import Panel, nice_ticks, svg_chart

SVG = "{http://www.w3.org/2000/svg}"


def record(step: int, loss: float, speed: float, world_size: int = 16) -> dict[str, object]:
    return {"step": step, "loss": loss, "tokens_per_second": speed, "world_size": world_size, "restarts": 0}


RECORDS = [record(10, 3.0, 900.0), record(20, 2.0, 1000.0), record(30, 1.5, 500.0, 8), record(40, 1.0, 600.0, 8)]


def chart(records: list[dict[str, object]], title: str = "fsdp-p5-16 (local)") -> ElementTree.Element:
    return ElementTree.fromstring(svg_chart(records, title))


def test_ticks_are_round_and_span_the_data() -> None:
    assert nice_ticks(10, 40) == [10, 20, 30, 40]
    assert nice_ticks(0, 1000) == [0, 200, 400, 600, 800, 1000]
    ticks = nice_ticks(1.0, 3.0)
    assert ticks[0] <= 1.0 and ticks[-1] >= 3.0
    assert nice_ticks(2.0, 2.0)[-1] > 2.0  # a flat line still gets an axis


def test_each_logged_step_is_a_point_placed_on_its_axes() -> None:
    root = chart(RECORDS)
    lines = {line.get("class"): line.get("points", "").split() for line in root.iter(f"{SVG}polyline")}
    assert set(lines) == {"training", "tokens-per-second"}
    panel = Panel(40, nice_ticks(10, 40), nice_ticks(1.0, 3.0))
    first_x, first_y = (float(v) for v in lines["training"][0].split(","))
    assert (round(first_x, 1), round(first_y, 1)) == (round(panel.x(10), 1), round(panel.y(3.0), 1))
    assert len(lines["training"]) == len(lines["tokens-per-second"]) == 4


def test_a_change_of_world_size_is_marked_on_both_panels() -> None:
    root = chart(RECORDS)
    assert len([line for line in root.iter(f"{SVG}line") if line.get("class") == "world-size"]) == 2
    assert any(text.text == "world size 8" for text in root.iter(f"{SVG}text"))


def test_a_restarted_step_counts_once_the_later_record() -> None:
    root = chart([*RECORDS[:3], record(20, 2.5, 800.0, 8), RECORDS[3]])
    (training,) = [line for line in root.iter(f"{SVG}polyline") if line.get("class") == "training"]
    assert len(training.get("points", "").split()) == 4


def test_the_title_is_escaped() -> None:
    assert chart(RECORDS[:1], "a <b> & c").findtext(f"{SVG}text") == "a <b> & c"
