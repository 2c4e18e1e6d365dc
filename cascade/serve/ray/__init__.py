"""The served pipelines on Ray Serve: heavy stages as deployments, light ones in the ingress.

    cascade serve --ray --replicas 2 --tiny             # a local Ray cluster, 2 VLM replicas
    cascade serve --ray --address ray://head:10001      # an existing cluster
    serve run serve_config.yaml                         # written by `cascade deploy`

Nothing here names a stage type: a stage class declares how it is served (`Stage.serving`, a
`cascade.stage.Serving`: heavy or light, Ray resources, batchable with `run_batch`, an affinity
input) and the layer reads the declarations through the stage registry. By job:

- `options`: the layout (`RayOptions`) and `build_app`'s args (`app_args` / `split_args`);
- `configs`: what a replica needs to rebuild a stage (`stage_config`, `stage_key`);
- `replica`: one deployment per heavy stage type (`StageReplica`): it builds and sets up every
  configuration of that type the pipelines use, answers calls (`run`), streams a call's tokens
  as they are generated (`run_streaming`), routes by affinity (`@serve.multiplexed`) and batches
  batchable calls (`@serve.batch` -> `Stage.run_batch`);
- `executor`: the ingress side (`RemoteStages`, the pipelines' `StageExecutor`): large inputs
  `ray.put` once for every hop, affinity ids, retries when a replica dies, streamed tokens;
- `ingress`: the HTTP ingress (`Ingress`), the usual app over an `Engine` whose heavy stages run
  remotely, readiness from the deployments' replicas, their figures on /metrics;
- `app`: `build_app(args)`, the application builder `serve run` imports;
- `deploy` / `cli`: `cascade serve --ray` and `cascade deploy`.

Only `options`, `configs` and `cli` import without Ray; the other modules import `ray`.
"""
