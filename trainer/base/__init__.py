"""The trainer's torch-free base: the facts, rules and S3 transfers that the layers above the trainer share with it.

The stack, the sizing model and the policy pack import nothing else of the trainer, and nothing here imports torch or
transformers, through any chain of imports (tests/test_layering.py). A module that needs torch belongs in another
role folder.

Its parts, each a folder named for its concern: flags/, model/, pod/, s3/, checkpoint/, metrics/ and hardware/, with
errors.py, faults.py and units.py beside them (tests/test_layering.py BASE_LAYERS orders them).
"""
