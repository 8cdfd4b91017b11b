"""The settings of a ``retrieval-svc`` command, or a one-line configuration error (exit 2)."""

from __future__ import annotations

import os

import typer
from pydantic import ValidationError
from pydantic_settings import SettingsError

from retrieval_svc.config_words import settings_error
from retrieval_svc.settings import Settings


def load_settings(*, serving: bool = True) -> Settings:
    """Settings from the environment, or a readable exit. A command that serves nobody
    (``serving=False``: it only reads the cluster) does not need API keys configured."""
    try:
        if (
            not serving
            and not os.environ.get("RSVC_API_KEYS")
            and not os.environ.get("RSVC_API_KEYS_FILE")
        ):
            return Settings(auth_disabled=True)
        return Settings()
    except (ValidationError, SettingsError) as exc:
        typer.secho(settings_error(exc), err=True, fg="red")
        raise typer.Exit(2) from None
