"""The settings of a ``retrieval-svc`` command, or a one-line configuration error (exit 2)."""

from __future__ import annotations

import typer
from pydantic import ValidationError

from retrieval_svc.config_checks import describe_errors
from retrieval_svc.settings import Settings


def load_settings() -> Settings:
    """Settings from the environment, or a readable exit."""
    try:
        return Settings()
    except ValidationError as exc:
        typer.secho(f"configuration error: {describe_errors(exc)}", err=True, fg="red")
        raise typer.Exit(2) from None
