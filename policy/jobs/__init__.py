"""The training job's objects as the policy pack reads them: one reader per job API (`reader.py`), each in a module of
its own (`pytorchjob.py`, `trainjob.py`), found by the resource type of the object that holds the worker pod
(`registry.py`)."""
