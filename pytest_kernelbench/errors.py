"""Errors that mean the user asked for something we cannot do (bad option, missing data)."""


class KernelBenchUsageError(Exception):
    """One line that says what is wrong and how to fix it; shown without a traceback."""
