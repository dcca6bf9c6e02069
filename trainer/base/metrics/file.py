"""The one reader of the trainer's --metrics-file: one JSON object per logged step, a line each
(trainer/base/metrics/figures.py writes it), and one for each start the fabric preflight ended (step 0, no training
figures), which it leaves out. The run's record (trainer/record/archive.py) and the scaling report (sizing/scaling.py)
read whole files with it; the local run reads the lines appended since its last look (local/report.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainer.base.metrics.figures import PREFLIGHT_FAILED_FIELD

Record = dict[str, Any]
# What every record the trainer writes carries, and what the reports cannot do without.
REQUIRED_FIELDS = ("step", "world_size", "tokens_per_second")


class MetricsFileError(ValueError):
    """A metrics file that is not what the trainer writes; the message names the file and the line."""


def parse_records(text: str, source: Path | str, first_line: int = 1) -> list[Record]:
    """The records of complete lines of a metrics file (`first_line`: the number of the text's first line)."""
    records = []
    for number, line in enumerate(text.splitlines(), start=first_line):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise MetricsFileError(f"{source}:{number}: not a JSON object ({error.msg})") from None
        missing = [name for name in REQUIRED_FIELDS if not isinstance(record, dict) or name not in record]
        if missing:
            raise MetricsFileError(f"{source}:{number}: missing {', '.join(missing)}; expected the trainer's metrics")
        if not record.get(PREFLIGHT_FAILED_FIELD):  # a start the preflight ended: no training figures to read
            records.append(record)
    return records


def read_records(path: Path) -> list[Record]:
    """Every record of a finished run's metrics file; MetricsFileError when there is none or a line is wrong."""
    if not path.is_file():
        raise MetricsFileError(f"{path}: no such metrics file")
    records = parse_records(path.read_text(), path)
    if not records:
        raise MetricsFileError(f"{path}: no metrics records; expected the trainer's --metrics-file of a finished run")
    return records
