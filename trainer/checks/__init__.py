"""What a run checks before it trains: the optional packages its flags need (packages.py) and its fabric, timed
before the model loads (fabric_preflight.py).
"""
