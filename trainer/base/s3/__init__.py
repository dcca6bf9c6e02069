"""S3: the run's data in and artifacts out. URIs (uri.py), the endpoint and region every client uses (endpoint.py),
where a run's artifacts sit under its --artifacts-uri (run_layout.py).
"""
