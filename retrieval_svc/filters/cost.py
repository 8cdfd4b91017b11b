"""What a compiled filter costs Elasticsearch, and the budget it must fit (design.md §4).

The bounds of the filter language (depth, conditions, list and text lengths) keep a body
small, not cheap: 200 substring conditions of 400 characters each fit them, and each one is a
``*…*`` wildcard that walks a field's whole term dictionary through an automaton; together
they tripped Elasticsearch's circuit breaker and held every other search. So each condition's
compiled query is costed on three measures, and the sum must fit ``BUDGET`` before anything is
sent; over it, the 400 names the condition that costs most on the measure that was exceeded.

* pattern characters — of ``wildcard`` and ``prefix`` patterns: the automaton's size, times
  the terms it is run against;
* terms — values of ``term``/``terms`` queries, characters of phrases: a lookup and a posting
  list each;
* clauses — leaf queries: the boolean query's work per document.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from retrieval_svc.errors import InvalidRequest


@dataclass(frozen=True, slots=True)
class Cost:
    """The cost of a query on each measure."""

    pattern_chars: int = 0
    terms: int = 0
    clauses: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.pattern_chars + other.pattern_chars,
            self.terms + other.terms,
            self.clauses + other.clauses,
        )


# Room for what people filter on (a few substring searches, long `in` lists, the most
# conditions the language allows), and far below what stalled the cluster.
BUDGET = Cost(pattern_chars=1024, terms=4096, clauses=400)
_NAMES = {
    "pattern_chars": "substring/prefix pattern characters",
    "terms": "terms",
    "clauses": "clauses",
}


def query_cost(query: Any) -> Cost:
    """The cost of a compiled Elasticsearch query (a filter's, or any part of it)."""
    total = Cost()
    stack = [query]
    while stack:  # iterative: a query is as deep as the filter, and no deeper than allowed
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for kind, body in node.items():
            if kind == "bool":
                stack.extend(v for k, v in body.items() if k != "minimum_should_match")
            elif kind in ("wildcard", "prefix"):
                (spec,) = body.values()
                pattern = spec.get("value", "") if isinstance(spec, dict) else spec
                total += Cost(pattern_chars=len(str(pattern)), clauses=1)
            elif kind == "terms":
                (values,) = body.values()
                total += Cost(terms=len(values), clauses=1)
            elif kind in ("match_phrase", "match"):
                (text,) = body.values()
                # Words, or CJK characters (the cjk analyzer makes a bigram of each): at most.
                total += Cost(terms=max(1, len(str(text))), clauses=1)
            elif kind == "term":
                total += Cost(terms=1, clauses=1)
            else:  # range, exists, match_all, match_none
                total += Cost(clauses=1)
    return total


def check_budget(parts: Iterable[tuple[str, Any]], budget: Cost = BUDGET) -> None:
    """Refuse (400) compiled parts, given as ``(path, query)``, whose cost is over ``budget``;
    the error names the costliest part on the measure that was exceeded."""
    costed = [(path, query_cost(query)) for path, query in parts]
    total = sum((cost for _, cost in costed), Cost())
    for measure in fields(Cost):
        name = measure.name
        spent, allowed = getattr(total, name), getattr(budget, name)
        if spent <= allowed:
            continue
        path, worst = max(costed, key=lambda part: getattr(part[1], name))
        raise InvalidRequest(
            f"{path}: the filter is too costly to run: {spent} {_NAMES[name]} in all, over the "
            f"budget of {allowed}; this condition has {getattr(worst, name)}. Shorten or "
            "remove substring conditions and long value lists.",
            path=path,
        )
