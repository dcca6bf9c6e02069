"""What the launcher and the workers share with the job's manifests and the local run: the environment (env.py), each
start's identity (attempt.py), gang restarts (gang_restarts.py), the bad-node taint (bad_node.py), exit codes
(exits.py), SIGTERM (shutdown.py), helpers that end with their parent (parent_death.py), staging (staging.py), the
Hugging Face token (hub_token.py) and AWS calls retried while a grant takes effect (aws_retry.py).
"""
