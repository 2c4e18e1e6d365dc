"""`cascade bench` asks every question cold (no cache left from an earlier question), then warm."""

from PIL import Image as PILImage

from cascade import QA
from cascade.eval.bench import ask_cold_then_warm
from cascade.eval.items import EvalItem
from cascade.eval.judge import Readers
from cascade.eval.photos import scene_images


def test_each_question_is_cold_then_warm_and_flops_are_as_computed(tmp_path):
    paths = []
    for name in ("astronaut", "coffee"):
        paths.append(str(tmp_path / f"{name}.png"))
        PILImage.fromarray(scene_images()[name]).save(paths[-1])
    item = EvalItem(
        id="scene",
        split="test",
        genre="router",
        media_kind="images",
        media=tuple(paths),
        question="Which picture shows a cup?",
        answer="coffee",
        kind="scene",
        frames=(1,),
    )
    qa = QA.offline("full_res", size="test", type_overrides={"vlm_answer": {"max_new_tokens": 2}})
    readers = Readers()

    first, answer = ask_cold_then_warm(qa, item, "full_res", readers, None)
    assert answer.bill.cache == "miss" and first["prefill_flops"] == answer.bill.prefill_flops > 0
    assert first["warm_kv_cache"] == "hit"
    assert first["warm_prefill_flops"] < first["prefill_flops"]  # the visual prefix was reused

    # The same question again: the caches the first one filled are emptied, so it is cold again.
    again, answer = ask_cold_then_warm(qa, item, "full_res", readers, None)
    assert answer.bill.cache == "miss" and again["prefill_flops"] == first["prefill_flops"]
