"""What the hardware can do: each accelerator chip's peak throughput and memory bandwidth (chips.py), and the fabric
preflight's arithmetic and verdict (fabric.py).
"""
