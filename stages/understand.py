"""Understand the question once: the typed `Query` every later stage reads
(`cascade.evidence.query`)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from cascade.artifacts import Route
from cascade.errors import InputError
from cascade.evidence.intent import IntentScorer
from cascade.evidence.query import Query
from cascade.evidence.understanding import understand
from cascade.model_refs import ModelRef
from cascade.stage import Stage, StageParams, stage


@stage("understand")
class Understand(Stage):
    """Turn the question into a `Query`: intent, target kind (sign, title, heading, table cell,
    paragraph fact, code identifier, key-value, object count, object, scene), the answer type,
    colour / position / size / time order, cue words and language (English and Chinese rules; an
    optional sentence-embedding zero-shot intent score for English wording the rules miss).

    Retrieval, the resolution router, the evidence search, the tool answer and the crop selection
    take `query` as an input; none of them parses the question again. `route` says what was
    understood (`understood: table_cell row='Express 12' col='Dep' answer=cell lang=en`)."""

    class Params(StageParams):
        text_model: str | None = Field(
            "auto",
            description="sentence-transformers model for the zero-shot intent score; "
            "'auto' = the bundled all-MiniLM-L6-v2 when installed, null = rules only",
        )
        zero_shot_weight: float = Field(
            0.5,
            ge=0,
            le=1,
            description="share of the zero-shot score vs the rules in the intent scores",
        )

    params: Params  # what the base class's `params` property returns here

    @dataclass(frozen=True)
    class Outputs:
        query: Query
        route: Route

    def _text_model(self) -> str | None:
        from cascade.stages.text_embed import bundled_text_model

        return bundled_text_model() if self.params.text_model == "auto" else self.params.text_model

    def setup(self) -> None:
        self.scorer = IntentScorer(self._text_model(), self.params.zero_shot_weight)

    def model_refs(self) -> list[ModelRef]:
        from cascade.stages.text_embed import text_model_ref

        name = self._text_model()
        return [text_model_ref(name, "text_model")] if name else []

    def run(self, question: str) -> Outputs:
        if not isinstance(question, str) or not question.strip():
            raise InputError("understand: question must be a non-empty string")
        query = understand(question, self.scorer)
        return self.Outputs(query, query.route())
