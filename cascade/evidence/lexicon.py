"""The words a question is understood by, in English and Chinese: one table per thing asked.

Each entry is an exact rule (a word list or a pattern), never a similarity: what a rule matched
is what the route reports. English patterns are matched on the lower-cased question with word
boundaries; Chinese ones on the question as written (Chinese has no spaces, so no boundaries).
"""

from __future__ import annotations

import re


__all__ = [
    "COLOURS",
    "ZH_COLOURS",
    "ORDINALS",
    "ZH_DIGITS",
    "zh_number",
    "GENERIC",
    "ZH_GENERIC",
    "TARGET_WORDS",
    "ANSWER_TYPES",
    "ZH_ANSWER_TYPES",
    "KEYS",
    "ZH_KEYS",
    "KEY_NOUNS",
    "KEY_NOUN_WORDS",
    "key_noun_pattern",
    "ZH_KEY_NOUNS",
    "DOCUMENT_DATE_VERBS",
    "DOCUMENT_NOUNS",
    "AMOUNT_DUE",
    "AMOUNT_DUE_FILLERS",
    "ZH_DOCUMENT_DATE_VERBS",
    "ZH_AMOUNT_DUE",
    "CODE_KINDS",
    "ZH_CODE_KINDS",
    "EVENT_VERBS",
    "SIZE_WORDS",
    "zh_without_few",
]

COLOURS = {
    "red": "red",
    "green": "green",
    "blue": "blue",
    "yellow": "yellow",
    "orange": "orange",
    "white": "white",
    "black": "black",
    "purple": "purple",
    "violet": "purple",
    "pink": "pink",
    "brown": "brown",
    "grey": "grey",
    "gray": "grey",
}
ZH_COLOURS = {
    "红": "red",
    "绿": "green",
    "蓝": "blue",
    "黄": "yellow",
    "橙": "orange",
    "橘": "orange",
    "白": "white",
    "黑": "black",
    "紫": "purple",
    "粉": "pink",
    "棕": "brown",
    "褐": "brown",
    "灰": "grey",
}

# Words for size: of the target ("the small sign") or of a named anchor ("the big banner").
SIZE_WORDS = {
    "small": "small",
    "smaller": "small",
    "smallest": "small",
    "little": "small",
    "tiny": "small",
    "big": "big",
    "bigger": "big",
    "biggest": "big",
    "large": "big",
    "larger": "big",
    "largest": "big",
    "huge": "big",
    "giant": "big",
    "banner": "big",
    "headline": "big",
}
ZH_SIZE = (("大横幅", "big"), ("横幅", "big"), ("大字", "big"), ("小字", "small"))

ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}
ZH_DIGITS = {
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


def zh_number(text: str) -> int | None:
    """'三' -> 3, '十二' -> 12, '二十' -> 20, '12' -> 12 (up to 99); None when not a number."""
    if text.isdigit():
        return int(text)
    if not text or any(ch not in ZH_DIGITS and ch != "十" for ch in text):
        return None
    if "十" not in text:
        return ZH_DIGITS[text] if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    return (ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (ZH_DIGITS.get(ones, 0) if ones else 0)


# 几 asks "how many" only on its own: after a demonstrative or a quantifier it is "a few" (这几张照片
# "these photos", 前几帧 "the first frames", 好几个 "quite a few"); 哪几 is "which ones".
ZH_FEW = re.compile(r"(?<=[这那前后头好哪])几")


def zh_without_few(text: str) -> str:
    """`text` with every 几 that means "a few" (not "how many") blanked out, so the rules that
    read 几 as a count or a number question see only the interrogative ones."""
    return ZH_FEW.sub(" ", text)


# Words that say *that* something is read, not *what*: never cues.
GENERIC = set(
    """a an the is are was were be been being what which who whom whose where when how
does do did say says said written write writes read reads text texts word words shown show shows
visible see seen on in of at to for from by with and or this that these those there here it its
one image images picture pictures photo photos video clip frame frames scene please tell me can you
could would will value amount name named called exactly printed print appear appears appeared
displayed display mentioned given listed stated state the any some about into than then also
has have had get got give us our your my i brief briefly short shortly screenshot screenshots""".split()
)
ZH_GENERIC = (
    "请问",
    "什么",
    "这份",
    "这段",
    "这张",
    "一下",
    "哪个",
    "哪些",
    "哪一",
    "哪",
    "写着",
    "写的",
    "写了",
    "上面",
    "下面",
    "里面",
    "图片",
    "照片",
    "图中",
    "视频",
    "画面",
    "中的",
    "出现",
    "显示",
    "一个",
    "这个",
    "那个",
    "这些",
    "那些",
    "内容",
    "文字",
    "是",
    "的",
    "在",
    "了",
    "吗",
    "呢",
    "有",
    "上",
    "中",
    "里",
    "个",
    "张",
    "这",
    "那",
    "和",
    "与",
    "写",
    "字",
    "么",
    "请",
    "告诉",
    "我",
    "看到",
    "能",
    "可以",
    "多少",
    "几",
    "为",
    "被",
    "将",
    "会",
    "要",
)

# Words naming a kind of target, removed from the cues (they say where to look, not what).
TARGET_WORDS = set(
    """sign signs label labels plate plates poster posters banner banners board
placard sticker tag caption title titled heading headings subheading header headline section
sections subsection chapter part table tables row rows column columns cell cells col function
functions method methods class classes variable variables constant identifier parameter argument
code snippet program script defined defines define declared declares document page article paper
report notice paragraph passage according text letter memo form receipt bill invoice sheet sheets
slip slips leaflet leaflets flyer flyers handout handouts brochure brochures booklet pamphlet
printout statement photographed""".split()
)
# Kinds of printed documents a question may name (what it is, not what it says).
DOCUMENT_NOUNS = (
    "document|page|article|paper|report|book|notice|poster|form|memo|letter|sheet|"
    "leaflet|flyer|handout|brochure|booklet|pamphlet|printout|manual|handbook|guide"
)
# "How much is due / owed / payable / left to pay": the amount a bill asks for, its total.
AMOUNT_DUE = r"\b(?:due|owed?|owing|payable|pay|balance|outstanding)\b"
AMOUNT_DUE_FILLERS = frozenset(
    {"still", "remaining", "yet", "now", "left", "altogether", "overall", "together"}
)
# The same two readings in Chinese: 开 / 开具 / 打印 ... a document on its date ("这张发票是哪天开的"),
# and what is (still) to pay ("还需要支付多少钱", "一共要付多少").
ZH_DOCUMENT_DATE_VERBS = r"开具|开票|开的|开出|打印|出具|签发|购买|买的|下单|付款"
ZH_AMOUNT_DUE = (
    r"(?:要|需要?|应该?|还)(?:支付|付|交|给)|欠|待付|未付|(?:一共|总共)(?:花|付|消费|用)了?"
)

# Answer types a question asks for, first match wins (English: lower-case, word boundaries).
ANSWER_TYPES: tuple[tuple[str, str], ...] = (
    (
        "number",
        r"\bhow many\b|\bwhat number\b|\bwhich number\b|\bhow long\b|\bhow far\b|"
        r"\bhow old\b|\bwhat percentage\b|\bpercent\b",
    ),
    ("day", r"\b(?:which|what) day\b|\bday of the week\b|\bweekday\b"),
    ("time", r"\btime\b|\bat what hour\b|\bhow late\b|\bhow early\b"),
    ("date", r"\b(?:what|which) date\b|\bdate\b|\bwhat year\b|\bwhich year\b"),
    (
        "amount",
        r"\bhow much\b|\bprice\b|\bcost\b|\bcosts\b|\bfee\b|\bfare\b|\btotal\b|"
        r"\bsubtotal\b|\btax\b|\bvat\b|\bamount\b|\bpaid\b|\bbalance\b",
    ),
    ("id", r"\b(?:number|no\.?|#|id|code|reference|ref)\b|#"),
    ("when", r"\bwhen\b"),
)
ZH_ANSWER_TYPES: tuple[tuple[str, str], ...] = (
    ("date", r"日期(?:是|为)?哪一?天"),  # a date asked for by 哪天 is still a date
    ("day", r"星期几|礼拜几|周几|哪一?天"),
    ("time", r"几点|什么时间|什么时候几点|时刻"),
    ("date", r"日期|哪一?年|几月几[日号]|哪一?日|几号"),
    ("amount", r"多少钱|价格|价钱|金额|费用|总计|合计|总额|小计|税额|税|票价|花了多少|付了多少"),
    ("id", r"号码|编号|单号|订单号|发票号|账号|代码"),
    ("when", r"什么时候|何时"),
    ("number", r"多少|几"),
)

# Key-value keys: a key name, its pattern in English, its pattern in Chinese (both languages are
# looked for on the page whatever the question's language: a Chinese question about an English
# receipt is common). First match wins, so subtotal and tax come before total.
KEYS: tuple[tuple[str, str], ...] = (
    ("subtotal", r"\bsub[\s-]?total\b"),
    ("tax", r"\b(?:tax|vat|gst)\b"),
    ("total", r"\b(?:total|amount due|balance due|grand total)\b"),
    ("date", r"\bdate\b"),
    ("number", r"\b(?:number|no\.?|#|id|reference|ref)\b|#"),
)
ZH_KEYS: tuple[tuple[str, str], ...] = (
    ("subtotal", r"小计"),
    ("tax", r"税额|税金|税"),
    ("total", r"合计|总计|总额|总金额|总价|应付|实付|应收|实收|共计"),
    ("date", r"日期"),
    ("number", r"号码|编号|单号|(?<![几月型])号"),  # 几号 is a day of the month, 型号 a model
)
KEY_NOUNS = (
    "purchase order",
    "invoice",
    "receipt",
    "order",
    "claim",
    "policy",
    "account",
    "reference",
    "ticket",
    "booking",
    "customer",
    "transaction",
    "member",
    "case",
    "serial",
    "tracking",
)
# How a key noun is written, in a question and on a page (lower case; a noun not listed is its own
# word). A purchase order is printed "PO #", "P.O. No." or "Purchase Order" ("P.O. Box" is an
# address); a plain "order" is never the purchase order's field (asked for an order number, a page
# whose only order key is the PO's is not sure: the reader abstains).
KEY_NOUN_WORDS = {
    "purchase order": r"\bp\.?\s?o\b\.?(?!\.?\s*box)|\bpurchase[\s-]+orders?\b",
    "order": r"(?<!purchase\s)\borders?\b",
}
# What is done to a document on the day its "Date" field gives: "when was this invoice issued?"
# asks for that field, not for a date a paragraph tells of.
DOCUMENT_DATE_VERBS = frozenset(
    """issue issued print printed date dated make made write written
create created bill billed sign signed pay paid purchase purchased buy bought raise raised
place placed""".split()
)
ZH_KEY_NOUNS = {
    "采购订单": "purchase order",
    "采购单": "purchase order",
    "订购单": "purchase order",
    "发票": "invoice",
    "收据": "receipt",
    "小票": "receipt",
    "订单": "order",
    "账户": "account",
    "账号": "account",
    "客户": "customer",
    "会员": "member",
    "交易": "transaction",
    "流水": "transaction",
    "票": "ticket",
    "预订": "booking",
}


def key_noun_pattern(noun: str) -> str:
    """The English pattern of a key noun (`KEY_NOUN_WORDS`, else the word, plural or not)."""
    return KEY_NOUN_WORDS.get(noun, rf"\b{noun}s?\b")


CODE_KINDS = {
    "function": "function",
    "functions": "function",
    "method": "method",
    "methods": "method",
    "procedure": "function",
    "subroutine": "function",
    "class": "class",
    "classes": "class",
    "struct": "class",
    "interface": "class",
    "enum": "class",
    "variable": "variable",
    "variables": "variable",
    "constant": "variable",
    "parameter": "parameter",
    "argument": "parameter",
    "identifier": "identifier",
    "module": "module",
    "macro": "function",
}
ZH_CODE_KINDS = (
    ("函数", "function"),
    ("方法", "method"),
    ("类名", "class"),
    ("类", "class"),
    ("变量", "variable"),
    ("常量", "variable"),
    ("参数", "parameter"),
    ("标识符", "identifier"),
    ("模块", "module"),
)

# Verbs that end the name of an anchor event ("after the bus *passes*") or a target phrase.
EVENT_VERBS = set(
    """appear appears appeared appearing disappear disappears disappeared shown show
shows showed shown is are was were be been comes come came goes go went leaves leave left passes
pass passed enters enter entered exits exit exited arrives arrive arrived starts start started
ends end ended drives drove moves moved says say said reads read do does did has have had that
which who when while and then displayed turns turned gets got can could will would""".split()
)
