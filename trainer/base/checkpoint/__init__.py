"""Checkpoint rules that the sizing model shares with the trainer: the space a save needs (space.py) and which replica
writes or reads each item (writers.py).
"""
