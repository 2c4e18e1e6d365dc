"""Chinese rules for `understand`: a question -> the fields of its `Query`.

Chinese has no spaces: patterns are the words themselves, and cues are character bigrams of what
is left once question words, target kinds and attribute words are taken out.
"""

from __future__ import annotations

import re
from typing import Literal

from . import doc_lexicon as dlx
from . import lexicon as lx
from .intent import Intent, counted_label, zh_label_in
from .query import TimeOrder, cue_tokens
from .reader_model import Guess, take_guess

__all__ = ["read_chinese"]


def _zh_time_order(q: str) -> tuple[TimeOrder | None, str]:
    m = re.search(
        r"(?<![最然])(之后|以后|过后|出现后|后面出现|之前|以前|出现前|(?<=开始|结束|消失)[前后]|[前后]面(?=的?是?哪)|(?<=[^，,。？?])[前后](?=看到|看见|出现|显示|拍到))",
        q,
    )
    if m:
        relation: Literal["before", "after"] = "before" if "前" in m.group(1) else "after"
        head = q[: m.start()]
        start = max(head.rfind(c) for c in "，,。？?在当从")
        anchor = re.sub(
            r"(出现|消失|经过|离开|结束|开走|走过|开始)$", "", head[start + 1 :]
        ).strip()
        if anchor:
            rest = q[: start + 1] + q[m.end() :]
            size: Literal["small", "big"] | None = next(
                (s for w, s in lx.ZH_SIZE if w in anchor), None
            ) or (
                "big" if anchor.startswith("大") else "small" if anchor.startswith("小") else None
            )
            return TimeOrder(
                relation,
                anchor,
                tuple(sorted(_cues_zh(anchor))),
                zh_label_in(anchor),
                size,
                _colour_zh(anchor),
            ), rest
    if re.search(r"第一个|最先|最早|首先|一开始|开头", q):
        return TimeOrder("first"), q
    if re.search(r"最后|最末|结尾|最终", q):
        return TimeOrder("last"), q
    return None, q


def _colour_zh(q: str) -> str | None:
    m = re.search(r"([红绿蓝黄橙橘白黑紫粉棕褐灰])(?:色|底)", q)
    return lx.ZH_COLOURS[m.group(1)] if m else None


def _size_zh(q: str) -> str | None:
    if any(w in q for w, _ in lx.ZH_SIZE):
        return next(s for w, s in lx.ZH_SIZE if w in q)
    if re.search(r"(?:较|很|最)?小的|小(?=[牌标招告字])", q):
        return "small"
    if re.search(r"(?:较|很|最)?大的|大(?=[牌标招告字])", q):
        return "big"
    return None


def _position_zh(q: str) -> str | None:
    for words, pos in (
        (("左上",), "top-left"),
        (("右上",), "top-right"),
        (("左下",), "bottom-left"),
        (("右下",), "bottom-right"),
        (("左边", "左侧", "左面"), "left"),
        (("右边", "右侧", "右面"), "right"),
        (("上方", "顶部", "上面的"), "top"),
        (("下方", "底部", "下面的"), "bottom"),
        (("中间", "中央"), "centre"),
    ):
        if any(w in q for w in words):
            return pos
    return None


def _cues_zh(q: str) -> set[str]:
    """Content tokens of a Chinese question: its Latin words and numbers, and the bigrams of what
    is left of its Chinese once question words, target kinds, colours and sizes are taken out."""
    text = re.sub(_ZH_WHICH_SECTION, " ", q)
    text = re.sub(
        r"[红绿蓝黄橙橘白黑紫粉棕褐灰][色底]|第.[节章行列]|发票|小票|收据|订单|单号|标题|题目|牌子|标志|招牌|标牌|"
        r"告示|横幅|标签|表格|表中|代码|函数|方法|变量|段落|文中|通知|根据|合计|总计|"
        r"小计|金额|日期|星期|号码|编号|时间|几点|哪一?天|什么时候|何时|哪里|哪儿|谁|周几|之后|以后|之前|以前|左边|"
        r"右边|上方|下方|大的|小的|小|大|最后|最先|最早|首先|第一个|一开始",
        " ",
        text,
    )
    for w in sorted(lx.ZH_GENERIC, key=len, reverse=True):
        text = text.replace(w, " ")
    return cue_tokens(text)


def _zh_cell(q: str) -> tuple[str | None, str | None]:
    # "请问表中", "看一下这个配置对比表，", "成绩表里": which table, not a key
    body = re.sub(
        r"^(?:请问)?(?:帮我)?(?:看一下|看看|查一下|查查)?(?:[^，,的]{0,10}?(?:表格|表|成绩单|积分榜|排行榜|名单|清单)(?:里面|中|里|上)"
        r"[，,]?|[^，,]{0,12}?(?:表格|表)(?:里面|中|里|上)?[，,])",
        "",
        q,
    )
    m = re.search(r"^(.{1,20}?)[这那]一?行[，,的]?\s*(.{1,12}?)[这那]一?[列栏]", body)
    if m:
        return m.group(1).strip(" ，,"), m.group(2).strip(" ，,")
    m = re.search(
        r"第\s*([\d一二三四五六七八九十]+)\s*行.*?第\s*([\d一二三四五六七八九十]+)\s*列", body
    )
    if m:
        return f"row {lx.zh_number(m.group(1))}", f"column {lx.zh_number(m.group(2))}"
    m = re.search(
        r"^(.{1,20}?)的(.{1,12}?)(?:是|为|有)?(?:多少|什么|几|哪|何时|谁|[？?。！!]|$)", body
    )
    if m:
        # the words that point at the table, not at a key: "上海那一行", "票价在这张表里写的"
        def clean(key: str) -> str:
            key = re.sub(
                r"[这那]一?[行列栏]|一[行列栏]|在?(?:这张|这个|该)?(?:表格|表)(?:里面|中|里|上)?|"
                r"(?:写|填|列|显示)的$|对应$",
                "",
                key,
            )
            return key.strip(" ，,")

        row, column = clean(m.group(1)), clean(m.group(2))
        # "华东区第二季度的数字": a generic column word; the period at the end of the row is the
        # column
        period = re.search(
            r"(第.{1,3}(?:季度|周|月|年)|\d{2,4}年|[一二三四五六七八九十\d]{1,2}月)$", row
        )
        if column in ("数字", "数据", "数值", "值", "数") and period and period.start() > 0:
            row, column = row[: period.start()], period.group(1)
        return row or None, column or None
    return None, None


# a page, a document or a booklet ("这页文档叫什么名字？": what the page is called is its title)
_ZH_DOCUMENT = r"(?:文档|文件|文章|页面|这页|这一页|手册|报告|资料|册子|小册|传单|说明书|指南|书)"


_ZH_SIGN_NAMED = r"牌|标志|标识|告示|横幅|标签"  # a thing that carries text, named
_ZH_SIGN = _ZH_SIGN_NAMED + r"|写着|写的|写了|文字|字"
# "哪一节 / 哪个部分 / 哪个标题": a section asked for, by what it treats rather than its number
_ZH_WHICH_SECTION = r"哪(?:一个|一|个)?(?:小节|章节|节|章|部分|小标题|子标题|标题)"
_ZH_TREATS = r"(?:讲述|讲|介绍|说明|提到|谈到|涉及到?|描述|列出|关于)了?"
_ZH_AT = r"(?:是)?(?:在|属于|位于|写在|列在|出现在|放在)(?:文档|文件|页面|这页)?的?"


def _zh_section_topic(q: str) -> tuple[str | None, str]:
    """(the topic, the question without that phrase) of "退款政策在哪一节？", "哪个部分介绍了
    停车规定？", "讲退款的是哪一节？"."""
    body = re.sub(r"^(?:请问)?[，,]?", "", q)
    # "哪一节讲的是付款方式？那一节的标题是什么": the clause that asks which section
    body = next((c for c in re.split(r"[？?。！!]", body) if re.search(_ZH_WHICH_SECTION, c)), body)
    body = body.rstrip("？?。 ")
    body = re.sub(r"^[^，,]{1,12}[里中上][，,]", "", body)  # "这页课件里，": where, not what
    m = (
        re.search(rf"{_ZH_WHICH_SECTION}(?:里|中)?(?:是)?{_ZH_TREATS}(?:的是|是)?(.+)$", body)
        or re.search(rf"^(?:关于)?(.+?){_ZH_AT}{_ZH_WHICH_SECTION}(?:下面|之下|下|里|中)?", body)
        or re.search(
            rf"^{_ZH_TREATS}(.+?)的(?:是|那|那一|这)?(?:{_ZH_WHICH_SECTION}|(?:一|个)?(?:小节|章节|节|章|部分))",
            body,
        )
    )
    if not m:
        return None, q
    topic = re.sub(r"(?:的|相关的?)?(?:内容|信息|部分)$", "", m.group(1)).strip(" 的，,")
    if not topic or re.match(r"[这那该此]", topic) or re.search(_ZH_SIGN, topic):
        return None, q  # "这个牌子在哪一部分？" asks where a thing is, not which section
    return topic, body[: m.start()] + body[m.end() :]


def read_chinese(question: str, intent: Intent, guess: Guess | None = None) -> dict:
    """The `Query` fields of a Chinese question; `guess` as in `english.read_english`."""
    time_order, q = _zh_time_order(question)
    found: dict = {}
    answer_type = next((t for t, rx in dlx.ZH_ANSWER_TYPES if re.search(rx, q)), "text")
    kept = re.sub(dlx.ZH_EXCLUDED, "", q)  # 不算税费的票价: the tax is no key
    key = next((k for k, rx in dlx.ZH_KEYS if re.search(rx, kept)), None)
    noun = next((n for w, n in dlx.ZH_KEY_NOUNS.items() if w in q), None)
    if (
        key is None
        and noun
        and answer_type in ("day", "date", "when")
        and re.search(dlx.ZH_DOCUMENT_DATE_VERBS, q)
    ):
        key, answer_type = "date", "date"  # the document's own date field, as in English
    elif key is None and answer_type in ("amount", "number") and re.search(dlx.ZH_AMOUNT_DUE, q):
        key = "total"  # what is to pay: the bill's total
    section = re.search(r"第\s*([\d一二三四五六七八九十]+)\s*(?:节|章|部分|小节)", q)
    code = next((kind for w, kind in dlx.ZH_CODE_KINDS if w in q), None)
    sign = re.search(_ZH_SIGN, q)
    # a text that tells of things (a letter, a notice, an email): its dates are events' dates
    passage = re.search(
        r"根据|文中|文章|文里|段落|通知|公告|说明|[封这那]信|信里|信中|邮件|[里上中]说|写道|提到", q
    )
    topic, q_rest = (None, q) if section else _zh_section_topic(q)
    if (
        section
        or topic
        or re.search(r"章节|小节|节标题|小标题|子标题", q)
        or (re.search(_ZH_WHICH_SECTION, q) and not sign)
    ):  # "这个牌子在哪一部分？" is where a sign is
        found.update(
            target="heading",
            answer_type="text",
            section_name=topic,
            section_number=str(lx.zh_number(section.group(1))) if section else None,
        )
    elif code and re.search(r"代码|程序|定义|声明|调用|名|叫什么|叫啥|叫做", q):
        found.update(target="code_identifier", code_kind=code, answer_type="identifier")
    # "最上面那行大标题" / "那行字" is a line of text, not a table's row
    elif re.search(
        r"表格|表[中里上，,]|(?:成绩单|积分榜|排行榜|名单|清单)[中里上]|第.行|第.列|[这那]一?[行列栏](?!大?(?:标题|题目|字|文字))",
        q,
    ) and not (noun and key is not None and not re.search(r"[行列栏]", q)):  # 表格 is also a form
        found.update(target="table_cell", answer_type="cell", named=True)
    elif re.search(r"标题|题目|题名|书名|片名|刊名", q) or re.search(
        _ZH_DOCUMENT + r".{0,4}(?:叫什么|叫做什么|名字|名称|"
        r"是什么名)",
        q,
    ):
        found.update(target="title", answer_type="text")
    elif (
        key is not None
        and not (key == "number" and sign)
        and (answer_type not in ("day", "time") or "日期" in q)
        and not (key == "date" and passage)
    ):
        found.update(
            target="key_value",
            key=key,
            key_noun=noun,
            answer_type={"number": "id", "date": "date"}.get(key, "amount"),
        )
    elif "count" in intent.matched:  # counted in the picture, or a figure a text states
        found.update(
            target="object_count", answer_type="count", label=counted_label(q), unsure=True
        )
    elif passage:
        found["target"] = "paragraph_fact"
    elif answer_type != "text" and not sign:
        # a fact only by the answer's type: a default the learned reader retypes
        found.update(target="paragraph_fact", unsure=True)
    elif sign or "read" in intent.matched:
        found.update(target="sign", named=bool(re.search(_ZH_SIGN_NAMED, q)))
    elif "detail" in intent.matched:
        found.update(target="object", answer_type="description", label=zh_label_in(q))
    else:  # nothing matched: the default, which the learned reader may retype
        found.update(target="scene", answer_type="description", unsure=True)
    found.setdefault("answer_type", answer_type)
    take_guess(found, guess, key, noun, code, counted_label(q))
    read_as = {found["target"], found.get("second_kind")}
    if "table_cell" in read_as or ("paragraph_fact" in read_as and answer_type != "text"):
        row, col = _zh_cell(q)
        if row and col:
            found.update(row_key=row, column_key=col)
    found["cues"] = tuple(sorted(_cues_zh(q_rest)))
    found.update(
        colour=_colour_zh(q),
        position=_position_zh(q),
        size=_size_zh(q),
        time_order=time_order if found["target"] != "title" else None,
    )
    return found
