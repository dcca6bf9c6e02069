"""Kubernetes side of fsdp-eks: the platform, the PyTorchJob, the sizing math and the local run. No torch here."""
