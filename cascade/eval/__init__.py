"""The evaluation set and `cascade bench`: synthetic media with known answers, in two splits
generated apart (dev to tune, test to report), by genre, and the runner that scores pipelines on
it. The runtime never imports it (the web demo makes its example media with it).

- `items`: `EvalItem` and the genres; `splits/`: what each split draws from; `genres/`: one
  generator per genre family; `build`: `build_eval_set` (generate or reuse a split);
- `fonts`, `photos`, `render`, `page`, `photographed`, `video`: media with known content;
- `judge` (real OCR / detector, span comparison), `roles`, `bench` (`run_bench`), `report`.
"""
