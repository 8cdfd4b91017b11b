"""A deterministic synthetic corpus, principals and queries (pure; seeded).

Chinese building-operations text built from a fixed vocabulary with Zipf-distributed word
frequencies; 200 roles in a three-level hierarchy; ``access_roles`` 25% absent, 5% null,
5% ``[]``, 65% one to four Zipf-distributed roles; a few metadata fields to filter on.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUBJECTS = (
    "巡检 巡更 配电 电梯 消防 空调 给排水 照明 门禁 监控 保洁 绿化 停车 会议室 访客 "
    "报修 工单 安全 应急 值班 设备 维保 台账 能耗 水泵 风机 冷却塔 锅炉 变压器 "
    "配电柜 电缆 开关 插座 管道 阀门 水箱 屋面 外墙 幕墙 地下室 车库 大堂 卫生间 "
    "茶水间 办公区 机房 弱电 网络 广播 烟感 喷淋 灭火器 消火栓 疏散 演练 培训 考核 "
    "制度 流程 标准 记录 检查 整改 验收 合同 费用 预算 采购 供应商 租户 业主 物业 "
    "客服 投诉 满意度 钥匙 快递 梯控 电表 水表 燃气 排风 新风 净化 温控 湿度 噪声 "
    "照度"
).split()
MODIFIERS = (
    "日常 专项 月度 季度 年度 紧急 定期 临时 夜间 节假日 首次 复查 重点 一般 例行 特殊".split()
)
LINKS = "应 需 须 由 并 及时 按照 根据 负责 进行 完成 提交 确认 上报 处理 记录".split()
CATEGORIES = "巡检 设备 制度 服务 安全 财务 环境 行政".split()
TAGS = [f"标签{i:02d}" for i in range(12)]
ROLES = [f"角色{i:03d}" for i in range(200)]
TENANT = "bench"
KNOWLEDGE_ID = "bench-kb"


def vocabulary() -> list[str]:
    """Every word: modifier + subject compounds and the bare subjects."""
    return SUBJECTS + [m + s for m in MODIFIERS for s in SUBJECTS]


class Zipf:
    """Draw items with probability proportional to 1 / rank**s."""

    def __init__(self, items: list[Any], rng: random.Random, s: float = 1.1) -> None:
        self.items = items
        self.rng = rng
        self.weights = [1 / (rank**s) for rank in range(1, len(items) + 1)]

    def draw(self, k: int = 1) -> list[Any]:
        return self.rng.choices(self.items, weights=self.weights, k=k)


def hierarchy() -> dict[str, list[str]]:
    """Roles 0-49 inherit two of 50-149, which inherit one of 150-199 (depth 3)."""
    out: dict[str, list[str]] = {}
    for i in range(50):
        out[ROLES[i]] = [ROLES[50 + 2 * i], ROLES[51 + 2 * i]]
    for i in range(50, 150):
        out[ROLES[i]] = [ROLES[150 + (i - 50) // 2]]
    return out


def policy_text() -> str:
    """A Casbin policy: everyone reads the benchmark KB; the role hierarchy."""
    lines = [f"p, anyone, {TENANT}, *, read"]
    for child, parents in hierarchy().items():
        lines += [f"g, {child}, {parent}, {TENANT}" for parent in parents]
    return "\n".join(lines) + "\n"


def acl(rng: random.Random, roles: Zipf) -> tuple[str, Any]:
    """An access_roles form and value with the required distribution."""
    x = rng.random()
    if x < 0.25:
        return "absent", None
    if x < 0.30:
        return "null", None
    if x < 0.35:
        return "empty", []
    return "roles", sorted(set(roles.draw(rng.randint(1, 4))))


def sentence(rng: random.Random, words: Zipf) -> str:
    parts = words.draw(rng.randint(4, 8))
    return (
        "".join(p + (rng.choice(LINKS) if i % 2 == 0 else "") for i, p in enumerate(parts)) + "。"
    )


def document(i: int, rng: random.Random, words: Zipf, roles: Zipf, chunks: int) -> str:
    """A Markdown document with front matter and ``chunks`` sections of ~150 characters."""
    form, value = acl(rng, roles)
    meta: dict[str, Any] = {
        "title": f"{''.join(words.draw(2))}规程 {i}",
        "category": rng.choice(CATEGORIES),
        "year": rng.randint(2018, 2026),
        "priority": rng.randint(1, 5),
        "tags": sorted(set(rng.sample(TAGS, rng.randint(0, 3)))),
    }
    if form != "absent":
        meta["access_roles"] = value
    front = "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in meta.items())
    sections = []
    for n in range(chunks):
        body = "".join(sentence(rng, words) for _ in range(rng.randint(4, 6)))
        sections.append(f"## 第{n + 1}节 {''.join(words.draw(1))}\n\n{body}")
    return f"---\n{front}\n---\n# {meta['title']}\n\n" + "\n\n".join(sections) + "\n"


def write_corpus(root: Path, total_chunks: int, seed: int = 7, chunks_per_doc: int = 5) -> Path:
    """Write the corpus once per (size, seed); returns its folder."""
    folder = root / f"corpus-{total_chunks}-{seed}"
    marker = folder / ".complete"
    if marker.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    words, roles = Zipf(vocabulary(), rng), Zipf(ROLES, rng, s=1.0)
    for i in range(max(1, total_chunks // chunks_per_doc)):
        sub = folder / f"{i // 1000:04d}"
        sub.mkdir(exist_ok=True)
        (sub / f"doc-{i:07d}.md").write_text(
            document(i, rng, words, roles, chunks_per_doc), "utf-8"
        )
    marker.write_text("ok")
    return folder


@dataclass(frozen=True)
class Query:
    """One benchmark query: text, the principal's asserted roles, an optional filter."""

    text: str
    roles: list[str]
    filter: dict[str, Any] | None = None
    kind: str = "none"
    dify_conditions: list[dict[str, Any]] = field(default_factory=list)


def _condition(rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    """A filter condition and its Dify equivalent."""
    pick = rng.randrange(4)
    v: Any
    if pick == 0:
        v = rng.choice(CATEGORIES)
        return (
            {"field": "category", "op": "eq", "value": v},
            {"name": "category", "comparison_operator": "is", "value": v},
        )
    if pick == 1:
        v = rng.randint(2018, 2025)
        return (
            {"field": "year", "op": "gte", "value": v},
            {"name": "year", "comparison_operator": "≥", "value": v},
        )
    if pick == 2:
        v = sorted(rng.sample(range(1, 6), 2))
        return (
            {"field": "priority", "op": "in", "value": v},
            {"name": "priority", "comparison_operator": "in", "value": [str(x) for x in v]},
        )
    v = sorted(rng.sample(TAGS, 2))
    return (
        {"field": "tags", "op": "any", "value": v},
        {"name": "tags", "comparison_operator": "in", "value": v},
    )


def queries(n: int, seed: int = 11, role_count: tuple[int, int] = (1, 20)) -> Iterator[Query]:
    """``n`` queries: 40% without filter, 30% flat, 30% nested (flat part kept for Dify)."""
    rng = random.Random(seed)
    words, roles = Zipf(vocabulary(), rng), Zipf(ROLES, rng, s=1.0)
    for _ in range(n):
        text = " ".join(words.draw(rng.randint(2, 4)))
        asserted = sorted(set(roles.draw(rng.randint(*role_count))))
        x = rng.random()
        if x < 0.4:
            yield Query(text, asserted)
        elif x < 0.7:
            pairs = [_condition(rng) for _ in range(rng.randint(1, 3))]
            flt = {"and": [p[0] for p in pairs]}
            yield Query(text, asserted, flt, "flat", [p[1] for p in pairs])
        else:
            a = [_condition(rng) for _ in range(2)]
            b = [_condition(rng) for _ in range(2)]
            flt = {"or": [{"and": [p[0] for p in a]}, {"and": [p[0] for p in b]}]}
            yield Query(text, asserted, flt, "nested", [p[1] for p in a])
