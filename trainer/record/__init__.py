"""The run's record: the figures reported per logged step (reporting.py), the run's summary (summary.py) and chart
(chart.py) from its metrics file, and their copy in S3 beside the model (archive.py).
"""
