"""Communication between ranks: joining the job's process groups (distributed.py) and the collectives written for
every torch and backend the trainer runs on (collectives.py, reduce_scatter.py).
"""
