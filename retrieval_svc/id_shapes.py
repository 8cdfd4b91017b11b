"""What an identity value may look like: never a template, and, where a key says so, one of the
shapes its callers send.

Dify writes a variable as ``{{#sys.user_id#}}`` and resolves it before it calls; what it sends
when the binding is wrong is text that is no one's id:

* a template it did not recognise, as written: ``{{sys.user_id}}``, ``{{ user }}``,
  ``{{#sys.user-id#}}``;
* for a variable that does not exist, the variable's selector without its braces:
  ``{{#start.nosuchvar#}}`` arrives as ``start.nosuchvar`` (Dify 1.13.2's variable pool turns
  an unknown reference into its own text).

Either is refused wherever an identity arrives (``template_problem``): read as an id, it would
be a stranger served public documents only. A key may also name the shapes its callers' user
ids take (``user_id_shape``: ``email``, ``uuid``, ``directory_uid``, ``regex:<pattern>``, or a
list of them), so a typed name or a wrong variable fails loudly instead of reading as no one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Template delimiters of Dify ({{#…#}}), Jinja and Mustache ({{ … }}, {% … %}, {# … #}).
_TEMPLATE = re.compile(r"\{\{|\}\}|\{#|#\}|\{%|%\}")
# A Dify selector left as text: a system, environment or conversation variable, the start
# node's, or a node's (Dify names nodes by a millisecond timestamp), then attribute names as
# Dify's variable pattern allows them.
_SELECTOR = re.compile(
    r"(?:sys|env|conversation|start|[0-9]{10,})(?:\.[A-Za-z_][A-Za-z0-9_]{0,29}){1,10}"
)

SHAPES: dict[str, re.Pattern[str]] = {
    # One @, something on each side, a dot in the domain, no space: not a full RFC 5322
    # parser, a check that the caller sends an e-mail rather than a name or a variable.
    "email": re.compile(r"[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+"),
    "uuid": re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}"),
    # A POSIX or directory login: letters, digits, _ and -, no dot (a uid with dots needs
    # regex:, so that a selector such as ``node.var`` is not one).
    "directory_uid": re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"),
}
REGEX = "regex:"


def template_problem(value: str) -> str | None:
    """Why ``value`` is a variable Dify left unresolved rather than an identity, else None."""
    text = value.strip()
    if _TEMPLATE.search(text):
        return "template"
    if _SELECTOR.fullmatch(text):
        return "selector"
    return None


def shape_problem(shape: str) -> str | None:
    """Why ``shape`` is no shape a key may name, else None."""
    if shape in SHAPES:
        return None
    if shape.startswith(REGEX):
        try:
            re.compile(shape.removeprefix(REGEX))
        except re.error as exc:
            return f"user_id_shape {shape!r} is not a regular expression: {exc}"
        return None
    known = ", ".join([*SHAPES, REGEX + "<pattern>"])
    return f"user_id_shape {shape!r} is not a shape; known: {known}"


def fits(user_id: str, shapes: Iterable[str]) -> bool:
    """Whether ``user_id`` is in one of ``shapes`` (all of it); no shapes: any id fits."""
    given = list(shapes)
    for shape in given:
        pattern = SHAPES.get(shape) or re.compile(shape.removeprefix(REGEX))
        if pattern.fullmatch(user_id):
            return True
    return not given
