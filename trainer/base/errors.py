"""The one exception type for bad user input found after argument parsing (a data set in the wrong format, a
tokenizer too large for the model). `trainer.main` turns it into a message and exit status 2."""


class InputError(ValueError):
    """A problem with the run's inputs, named by flag and value; raised before training starts."""


class StorageError(RuntimeError):
    """The checkpoint file system cannot take the next checkpoint; the message names the sizes."""
