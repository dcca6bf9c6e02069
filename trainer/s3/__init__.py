"""S3: the run's data in and artifacts out. URIs (uri.py), the endpoint and region every client uses (endpoint.py).

Torch-free at this level: the stack, the job builder and the local run parse and build s3:// URIs with uri.py.
"""
