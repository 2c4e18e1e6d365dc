"""The words a question about a printed document is understood by, in English and Chinese: the
kinds of document, their key-value keys and key nouns, answer types, what is done to a document on
its date, and the kinds of code identifier (the rest of the question words: `lexicon`)."""

from __future__ import annotations

__all__ = [
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
]

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
# The same two readings in Chinese: 开 / 开具 / 打印 ... a document on its date
# ("这张发票是哪天开的"), and what is (still) to pay ("还需要支付多少钱", "一共要付多少").
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
    ("id", r"\b(?:number|no(?=\.|\s*[^\w\s]|$)|#|id|code|reference|ref)\b|#"),
    # "when" asks only where no other question word comes first ("who raised the alarm when
    # the mill caught fire?" asks who)
    ("when", r"^(?:(?!\b(?:who|whom|whose|what|which|where|why|how)\b).)*\bwhen\b"),
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
    # 'no' is a number's when written 'no.' or last ('invoice no?'), not in 'with no traffic'
    ("number", r"\b(?:number|no(?=\.|\s*[^\w\s]|$)|#|id|reference|ref)\b|#"),
)
# What a question leaves out names no key: "the total before tax", "票价不算税费" ask for the
# other figure. The left-out phrase runs to the end of its clause (in Chinese, to its 的); keys
# are read without it.
EXCLUDED = (
    r"\b(?:not counting|not including|excluding|exclusive of|without|before|net of)\b[^,.;?]*"
)
ZH_EXCLUDED = r"(?:不算|不含|不包括|不计|除去|扣除|去掉|除了)[^，,。；;？?的]*"
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
    [
        "issue",
        "issued",
        "print",
        "printed",
        "date",
        "dated",
        "make",
        "made",
        "write",
        "written",
        "create",
        "created",
        "bill",
        "billed",
        "sign",
        "signed",
        "pay",
        "paid",
        "purchase",
        "purchased",
        "buy",
        "bought",
        "raise",
        "raised",
        "place",
        "placed",
    ]
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
