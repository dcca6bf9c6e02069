"""Training data: records read as a stream in batches (records.py), tokenised in worker processes (tokenise.py,
formats.py) into the packed streams (prepare.py, packed.py), the held-out split (split.py), tokenised once per job
and memory-mapped by every rank (cache.py), the sample order (packing.py), and the tokenizers (tokenizer.py,
tokenizer_bytes.py).
"""
