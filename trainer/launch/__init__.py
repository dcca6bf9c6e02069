"""The launcher, `python -m trainer.launch` (launcher.py): torchrun in the pod's main process, its agent and
rendezvous hold (agent.py, rendezvous.py), its exit codes (exits.py), the staging step it runs first (stage.py), the
Hugging Face token it reads (hub_token.py) and the attempt id it hands the workers (attempt.py).

Torch-free at this level: the job's manifest, the local run and the policy pack import exits.py, stage.py and
hub_token.py, which carry TORCH_FREE (tests/test_layering.py).
"""
