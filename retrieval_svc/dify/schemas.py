"""Request and response bodies of ``POST /retrieval`` as Dify sends and reads them (design §7)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from retrieval_svc.acl.values import MAX_ID_LENGTH


class RetrievalSetting(BaseModel):
    """Dify's retrieval settings for an external knowledge base."""

    top_k: int = Field(ge=1, description="Most records to return.")
    score_threshold: float = Field(
        0.0, ge=0.0, le=1.0, description="Only records scoring at least this."
    )


class DifyCondition(BaseModel):
    """One metadata condition of Dify's knowledge-retrieval node."""

    name: str | list[str]
    comparison_operator: str
    value: Any = None


class MetadataCondition(BaseModel):
    """Dify's flat metadata filter: one list of conditions joined by and/or."""

    logical_operator: Literal["and", "or"] | None = "and"
    conditions: list[DifyCondition] = Field(default_factory=list)


class RetrievalRequest(BaseModel):
    """The body Dify posts to an external knowledge API."""

    model_config = ConfigDict(extra="ignore")

    knowledge_id: str = Field(min_length=1, max_length=MAX_ID_LENGTH)
    # Dify does not bound queries, so neither does this: a long one is cut (max_query_chars).
    query: str = Field(min_length=1)
    retrieval_setting: RetrievalSetting
    metadata_condition: MetadataCondition | None = None


class Record(BaseModel):
    """One retrieved chunk as Dify reads it."""

    content: str
    score: float
    title: str
    metadata: dict[str, Any]


class RetrievalResponse(BaseModel):
    """The answer to ``POST /retrieval``."""

    records: list[Record]
