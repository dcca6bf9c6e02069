"""Training metrics: the figures, their formulas and where they go (figures.py), and the one reader of the
--metrics-file (file.py).
"""
