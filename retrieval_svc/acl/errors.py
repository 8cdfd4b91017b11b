"""The policy's one error type, below every module of the package that raises it."""


class PolicyError(ValueError):
    """A model or policy that cannot be used."""
