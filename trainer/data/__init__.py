"""Training data: records rendered, tokenised, packed and ordered (packing.py), tokenised once per job and
memory-mapped by every rank (cache.py), and the tokenizers (tokenizer.py, tokenizer_bytes.py).
"""
