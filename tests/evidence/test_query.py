"""`understand`: one typed Query per question, per target kind, in English and Chinese."""

import dataclasses

import pytest

from cascade.evidence.query import TARGETS, Query, cue_tokens, has_cue
from cascade.evidence.understanding import understand
from cascade.registry import get_stage_class

# (question, target, fields the Query must hold)
CASES = [
    ("What does the sign say?", "sign", {"answer_type": "text", "language": "en"}),
    ("牌子上写着什么？", "sign", {"answer_type": "text", "language": "zh"}),
    ("Read the text on the sign.", "sign", {}),  # 'the text' of a sign, not of a passage
    ("What does the text of the notice say about parking?", "paragraph_fact", {}),
    ("What is the title of this document?", "title", {}),
    ("What is its heading?", "title", {}),
    ("这份文件的标题是什么？", "title", {"language": "zh"}),
    ("What is the heading of section 3?", "heading", {"section_number": "3"}),
    ("What is the title of the second section?", "heading", {"section_number": "2"}),
    ("What does the pricing section say?", "heading", {"section_name": "pricing"}),
    ("第三节的标题是什么？", "heading", {"section_number": "3"}),
    # the section asked for by what it treats
    ("Which section covers the guest wireless?", "heading", {"section_name": "guest wireless"}),
    (
        "In which part of the page is floor polishing mentioned?",
        "heading",
        {"section_name": "floor polishing"},
    ),
    ("Which heading are the parking rules under?", "heading", {"section_name": "parking rules"}),
    ("退款政策在哪一节？", "heading", {"section_name": "退款政策", "cues": ()}),
    ("哪个部分介绍了停车规定？", "heading", {"section_name": "停车规定"}),
    ("讲退款的是哪一节？", "heading", {"section_name": "退款"}),
    ("停车规则写在哪个标题下？", "heading", {"section_name": "停车规则", "cues": ()}),
    ("这个牌子在哪一部分？", "sign", {"section_name": None}),  # where a thing is, not a section
    ("这本手册叫什么名字？", "title", {"language": "zh"}),
    ("这篇文章的名称是什么？", "title", {}),
    # a fact question led by a preposition is still a fact question
    ("To whom should complaints be sent?", "paragraph_fact", {}),
    ("From which desk are visitor passes collected?", "paragraph_fact", {}),
    # what a text says is done with a thing, not where the thing is in the picture
    ("Where can lost umbrellas be collected?", "paragraph_fact", {}),
    ("Where is the umbrella in the photo?", "object", {"label": "umbrella"}),
    (
        "What is the Dep. of Express 12 in the table?",
        "table_cell",
        {"row_key": "Express 12", "column_key": "Dep", "answer_type": "cell"},
    ),
    (
        "In row Express 12, column Dep., what is the value?",
        "table_cell",
        {"row_key": "Express 12", "column_key": "Dep"},
    ),
    (
        "表格中快车12的出发时间是什么？",
        "table_cell",
        {"row_key": "快车12", "column_key": "出发时间"},
    ),
    # the asker is never a row: "how much <column> did I get"
    ("How much change did I get back?", "paragraph_fact", {"row_key": None, "column_key": None}),
    (
        "How many points did Arsenal get?",
        "table_cell",
        {"row_key": "Arsenal", "column_key": "points"},
    ),
    ("What's the heading of the second creature section?", "heading", {"section_number": "2"}),
    (
        "On which day will the east entrance be closed?",
        "paragraph_fact",
        {"answer_type": "day", "cues": ("closed", "east", "entrance")},
    ),
    ("What time does the museum open?", "paragraph_fact", {"answer_type": "time"}),
    ("东门哪天关闭？", "paragraph_fact", {"answer_type": "day", "cues": ("东门", "关闭")}),
    (
        "What is the name of the function that this code defines?",
        "code_identifier",
        {"code_kind": "function", "answer_type": "identifier"},
    ),
    ("这段代码定义的函数名是什么？", "code_identifier", {"code_kind": "function"}),
    ("What is the total amount?", "key_value", {"key": "total", "answer_type": "amount"}),
    (
        "What is the invoice number?",
        "key_value",
        {"key": "number", "key_noun": "invoice", "answer_type": "id"},
    ),
    ("What is the date on the receipt?", "key_value", {"key": "date", "answer_type": "date"}),
    ("合计多少钱？", "key_value", {"key": "total", "answer_type": "amount"}),
    # what was done to the document on its date asks for its Date field; an event's date does not
    ("When was the order placed?", "key_value", {"key": "date", "key_noun": "order"}),
    ("What date was this ticket purchased?", "key_value", {"key": "date", "answer_type": "date"}),
    ("On what date did the festival open?", "paragraph_fact", {"answer_type": "date"}),
    # how much is due / owed / payable on a bill: its total; a priced item is not
    ("How much is owed on this bill?", "key_value", {"key": "total", "answer_type": "amount"}),
    (
        "What amount is payable on the invoice?",
        "key_value",
        {"key": "total", "key_noun": "invoice"},
    ),
    ("How much is the coffee on the bill?", "paragraph_fact", {"answer_type": "amount"}),
    # the same two readings asked in Chinese; an event's day or a price stays a fact
    (
        "这张发票是哪天开的？",
        "key_value",
        {"key": "date", "key_noun": "invoice", "answer_type": "date"},
    ),
    ("这张小票一共要付多少？", "key_value", {"key": "total", "answer_type": "amount"}),
    ("活动是哪天开始的？", "paragraph_fact", {"answer_type": "day"}),
    ("门票多少钱？", "paragraph_fact", {"answer_type": "amount"}),
    # a document named by its kind: the kind is where to look, never a cue
    ("What's the name of the brochure shown?", "title", {"cues": ()}),
    ("What does the heading of the handout say?", "title", {"cues": ()}),
    ("发票号码是多少？", "key_value", {"key": "number", "key_noun": "invoice"}),
    # a purchase order named by its abbreviation or in full is one key noun, never a cue
    (
        "Which P.O. number does the letter quote?",
        "key_value",
        {"key": "number", "key_noun": "purchase order", "answer_type": "id"},
    ),
    (
        "What's the purchase order no.?",
        "key_value",
        {"key": "number", "key_noun": "purchase order"},
    ),
    ("When was the PO raised?", "key_value", {"key": "date", "key_noun": "purchase order"}),
    ("采购单号码是什么？", "key_value", {"key": "number", "key_noun": "purchase order"}),
    ("订单编号是多少？", "key_value", {"key": "number", "key_noun": "order"}),
    ("How many people are there?", "object_count", {"label": "person", "intent": "count"}),
    ("图中有几个人？", "object_count", {"label": "person"}),
    # 几 after a demonstrative is "these few", not "how many": a sign question stays one.
    ("那几段视频里，小牌子上写着什么？", "sign", {"size": "small", "answer_type": "text"}),
    ("好几张图片中都有一块蓝色的牌子，上面写着什么？", "sign", {"colour": "blue"}),
    ("这几张照片里一共有几辆车？", "object_count", {"label": "car", "answer_type": "count"}),
    ("What colour is the car?", "object", {"label": "car", "intent": "detail"}),
    ("Describe the scene.", "scene", {"intent": "scene"}),
    ("描述一下这个场景。", "scene", {}),
]


@pytest.mark.parametrize("question,target,fields", CASES, ids=[c[0] for c in CASES])
def test_target_kind_and_its_fields(question, target, fields):
    q = understand(question)
    assert q.target == target, q.describe()
    for name, value in fields.items():
        assert getattr(q, name) == value, (name, q.describe())


@pytest.mark.parametrize(
    "question, key",
    [
        ("What is the total before tax?", "total"),
        ("How much is the bill excluding VAT?", None),
        ("How much was the VAT?", "tax"),
        ("这张机票不算各种税费的话，票价是多少？", None),
        ("不含税的合计是多少？", "total"),
        ("税额是多少？", "tax"),
    ],
)
def test_what_a_question_leaves_out_names_no_key(question, key):
    """The tax in "before tax" and "不算税费" is what the asker does not want; answering with the
    tax line was a wrong tool answer (a fare asked without its taxes)."""
    assert understand(question).key == key


def test_every_target_kind_is_covered_in_both_languages():
    for lang in ("en", "zh"):
        seen = {understand(c[0]).target for c in CASES if understand(c[0]).language == lang}
        assert seen >= set(TARGETS) - {"object"} if lang == "zh" else seen == set(TARGETS)


@pytest.mark.parametrize(
    "question,relation,anchor,size,label",
    [
        (
            "What does the small sign that appears after the big banner say?",
            "after",
            "big banner",
            "big",
            None,
        ),
        ("What does the sign say after the bus passes?", "after", "bus", None, "bus"),
        ("What did the sign show before the red truck?", "before", "red truck", None, "truck"),
        ("在大横幅之后出现的小牌子上写着什么？", "after", "大横幅", "big", None),
        ("公交车开走以前牌子上写着什么？", "before", "公交车", None, "bus"),
    ],
)
def test_time_order_names_its_anchor_apart_from_the_target(question, relation, anchor, size, label):
    q = understand(question)
    assert q.time_order.relation == relation and q.time_order.anchor == anchor
    assert q.time_order.anchor_size == size and q.time_order.anchor_label == label
    assert q.target == "sign"
    if "small" in question or "小牌" in question:
        assert q.size == "small"  # the target's size, not the banner's


@pytest.mark.parametrize(
    "question,relation",
    [
        ("What does the last sign say?", "last"),
        ("What does the first sign say?", "first"),
        ("最后出现的牌子上写着什么？", "last"),
        ("第一个牌子上写着什么？", "first"),
    ],
)
def test_first_and_last(question, relation):
    assert understand(question).time_order.relation == relation


@pytest.mark.parametrize(
    "question,colour,position",
    [
        ("What does the red sign say?", "red", None),
        ("What does the sign on the left say?", None, "left"),
        ("What is written on the blue sign in the top right corner?", "blue", "top-right"),
        ("红色的牌子上写的是什么？", "red", None),
        ("左边的牌子写着什么？", None, "left"),
    ],
)
def test_colour_and_position(question, colour, position):
    q = understand(question)
    assert (q.colour, q.position) == (colour, position) and q.target == "sign"
    assert "red" not in q.cues and "left" not in q.cues


def test_reading_targets_need_pixels_scenes_do_not():
    assert understand("牌子上写着什么？").needs_high_res == 1.0
    assert understand("牌子上写着什么？").intent == "read"
    assert understand("Describe the scene.").needs_high_res == 0.0


def test_cues_are_exact_words_and_chinese_bigrams():
    assert cue_tokens("Gates 12 of EXPRESS") == {"gate", "12", "of", "express"}
    assert has_cue("东门将于周三关闭", understand("东门哪天关闭？").cues)
    assert not has_cue("西门", understand("东门哪天关闭？").cues)


def test_query_is_frozen_hashable_and_describes_itself():
    q = understand("What is the Dep. of Express 12 in the table?")
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.target = "sign"
    assert hash(q) == hash(understand("What is the Dep. of Express 12 in the table?"))
    assert q.describe().startswith("table_cell row='Express 12' col='Dep' answer=cell")
    assert q.route().reason.startswith("understood: table_cell")


def test_understand_stage_outputs_the_query_and_says_what_it_understood():
    stage = get_stage_class("understand")({"text_model": None})
    out = stage(question="在大横幅之后出现的小牌子上写着什么？")
    assert isinstance(out.query, Query) and out.query.language == "zh"
    assert out.route.branch == "understood"
    assert "sign" in out.route.reason and "order=after '大横幅'" in out.route.reason
    assert "lang=zh" in out.route.reason


def test_understand_stage_refuses_an_empty_question():
    from cascade.errors import InputError

    with pytest.raises(InputError, match="understand: question"):
        get_stage_class("understand")({"text_model": None})(question="  ")


@pytest.mark.parametrize(
    "question,relation,anchor_size,target_size",
    [
        (
            "Once the big red banner has disappeared, what does the small sign say?",
            "after",
            "big",
            "small",
        ),
        ("When the GRAND OPENING banner is gone, which sign comes next?", "after", "big", None),
        (
            "Until the large poster appears, what does the little plate read?",
            "before",
            "big",
            "small",
        ),
    ],
)
def test_a_clause_that_ends_or_starts_the_anchor_is_a_time_order(
    question, relation, anchor_size, target_size
):
    q = understand(question)
    assert q.target == "sign" and q.time_order.relation == relation, q.describe()
    assert (q.time_order.anchor_size, q.size) == (anchor_size, target_size), q.describe()
    assert "next" not in q.cues and "come" not in q.cues
