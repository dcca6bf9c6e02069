"""The launcher, `python -m trainer.launch` (launcher.py): torchrun in the pod's main process, its agent and
rendezvous hold (agent.py, rendezvous.py, etcd_generation.py), a TrainJob's gang restarts (gang.py) and the taint
of a bad node (node_taint.py). Its exit codes, staging step, token and attempt id are in trainer/base/pod/, and so
are what it shares with the job's manifests: the bad-node taint (bad_node.py) and the gang-restart variables
(gang_restarts.py).
"""
