"""Evidence for a question, with no model where rules are exact (import path `cascade.evidence`).

What the question asks for (`query`: the typed `Query` that `understand` builds once and every
later stage reads; `intent`; `lexicon`, the English and Chinese words it is read with), and what
the tools found that answers it: text blocks and their salience (`blocks`), the value of a key on
a document (`keyvalue`). Pure functions on the tools' outputs (OCR lines, detections, boxes):
stages call them, tests call them directly.

Document structure from OCR lines and `layout` regions (`structure`, the page model; `headings`:
title and section headings by number or topic; `tables`: the cell at row key x column key;
`paragraphs`: the sentence holding a phrase; `codeblocks`: the identifiers code defines), every
result with its boxes in source pixels; and the exact answer span inside a text (`spans`).
"""
