"""Kubernetes side of fsdp-eks: the cluster platform (workloads/platform/) and the training job (workloads/job/);
`python -m workloads --stack NAME` renders their objects. No torch here."""
