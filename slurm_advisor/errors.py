"""Errors a user can cause and fix. The CLI prints them as one line, never a traceback."""


class InputError(Exception):
    """Bad user input: a file, a line, a field or a plug-in. The message names which."""
