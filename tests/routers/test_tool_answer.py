"""Tools answer reading and counting questions when confident, else hint or defer to the VLM."""
from cascade import Box, Detection, OcrLine
from cascade.registry import get_stage_class

LINES = [OcrLine("OPEN", 0.97, Box(0, 50, 100, 80)), OcrLine("CAFE", 0.95, Box(0, 0, 100, 30)),
         OcrLine("cafe", 0.9, Box(0, 0, 100, 30), timestamp=2.0)]
DETS = [Detection("person", 0.9, Box(0, 0, 10, 10), timestamp=t) for t in (1.0, 1.0, 1.0, 2.0)] + \
       [Detection("bus", 0.95, Box(0, 0, 100, 100), timestamp=1.0)]


def tool(**params):
    return get_stage_class("tool_answer")(params)


def test_reads_one_place_in_reading_order():
    out = tool().run(question="What does the sign say?", ocr_lines=LINES)
    assert out.route.branch == "tool" and out.answer.text == "CAFE OPEN"
    assert out.answer.produced_by == "tool" and out.answer.usage["visual_tokens"] == 0
    assert len(out.answer.evidence.ocr_lines) == 2  # the frame at t=2.0 is another place


def test_reads_the_frame_whose_text_matches_the_question():
    lines = [OcrLine("MOVISTAR", 0.9, Box(0, 0, 50, 10), timestamp=1.0),
             OcrLine("GATE 12", 0.9, Box(0, 0, 50, 10), timestamp=5.0)]
    assert tool().run(question="Which gate number is on the sign?", ocr_lines=lines).answer.text == "GATE 12"


def test_counts_what_the_question_names_not_what_was_found():
    buses = [d for d in DETS if d.label == "bus"]
    out = tool().run(question="How many people are by the bus?", detections=buses)
    assert out.route.branch == "vlm" and out.answer is None


def test_counts_people_in_the_busiest_frame():
    out = tool().run(question="How many people are there?", detections=DETS)
    assert out.answer.text == "3" and "detector counted 3 person" in out.route.reason


def test_hint_mode_and_low_confidence_go_to_the_vlm():
    hint = tool(mode="hint").run(question="How many people?", detections=DETS)
    assert hint.route.branch == "vlm" and hint.answer is None
    assert hint.hint == "detector counted 3 person: 3"
    unsure = tool(min_confidence=0.99).run(question="What does it say?", ocr_lines=LINES)
    assert unsure.route.branch == "vlm" and "confidence 0.96 < 0.99" in unsure.route.reason


def test_scene_questions_are_not_for_tools():
    out = tool().run(question="What is the mood of this scene?", ocr_lines=LINES, detections=DETS)
    assert out.route.branch == "vlm" and out.hint == ""
