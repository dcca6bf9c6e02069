"""The trainer's flags: how an option is declared (options.py), the configuration they parse into (config.py), and the
numbers a run derives from them and its world size (parallel_plan.py).
"""
