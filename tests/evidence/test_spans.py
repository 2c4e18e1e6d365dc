"""Exact answer spans: the one day, date, time, amount, id, identifier, number ... in a text, or
None (abstain) when there is none or several different ones; English and Chinese."""

from __future__ import annotations

import pytest

from cascade.evidence.spans import KINDS, candidates, exact_span


@pytest.mark.parametrize(
    "text,kind,span",
    [
        # the day, not the sentence
        ("The east entrance will be closed on Tuesday for repairs.", "day", "Tuesday"),
        ("LAST ENTRY: SAT 17:00", "weekday", "SAT"),
        ("Tue (Tuesday) only", "day", "Tue"),  # one day written twice is one value
        ("东入口将于周二关闭进行维修。", "day", "周二"),
        ("每周一休息", "day", "周一"),
        ("本次活动定于星期六举行", "day", "星期六"),
        # dates and times
        ("Invoice date: 5 March 2024", "date", "5 March 2024"),
        ("Meeting on March 5, 2024 at 2:30 pm", "date", "March 5, 2024"),
        ("Meeting on March 5, 2024 at 2:30 pm", "time", "2:30 pm"),
        ("开票日期：2024年3月5日", "date", "2024年3月5日"),
        ("三月五日开业", "date", "三月五日"),
        ("营业时间 下午3点半", "time", "下午3点半"),
        (
            "Closed on Tuesday, 5 March 2024 at 14:30 for repairs",
            "when",
            "Tuesday, 5 March 2024 at 14:30",
        ),
        # amounts: never the subtotal's and the total's together
        ("Total ¥ 12.50", "amount", "¥ 12.50"),
        ("合计：12.50元", "amount", "12.50元"),
        ("TOTAL 1,234.56", "amount", "1,234.56"),
        # a decimal comma, whole (a till across Europe): never '24' of 'EUR 24,98'
        ("Rückgeld EUR 3,38", "amount", "EUR 3,38"),
        ("SUMME 1.234,56", "amount", "1.234,56"),
        ("Growth was 12.5% this year", "percent", "12.5%"),
        # ids among other numbers
        ("Invoice No. INV-2024-0042", "id", "INV-2024-0042"),
        ("Order A-10293, total $45.00, 3 items", "id", "A-10293"),
        ("Ref 88213 dated 2024-03-05", "id", "88213"),
        ("发票号码：04419873", "id", "04419873"),
        ("Flight CA1234 departs 08:15", "id", "CA1234"),
        # identifiers: the defined name, not the line
        ("def parse_header(self, line):", "identifier", "parse_header"),
        (
            "static int checksum_block(const uint8_t *data, size_t n)",
            "identifier",
            "checksum_block",
        ),
        (
            "export const loadUser = async (id: string): Promise<User> => {",
            "identifier",
            "loadUser",
        ),
        ("CREATE TABLE IF NOT EXISTS shipments (", "identifier", "shipments"),
        ("The helper load_invoices() reads the folder.", "identifier", "load_invoices"),
        # numbers, names, addresses, whole texts
        ("Red line 1200 riders", "number", "1200"),
        ("夜间班车的发车间隔缩短为十五分钟。", "number", "十五"),
        ("Signed: Dr. John Smith", "name", "Dr. John Smith"),  # the name as written
        ("The cleaning team is led by Ms. Alvarez.", "name", "Ms. Alvarez"),
        ("Spare keys are now kept in Room 330.", "place", "Room 330"),
        ("Board at Platform 9 on March 5", "place", "Platform 9"),
        ("请到B区领取", "place", "B区"),
        ("The new coffee machine arrives on 17 July.", "date", "17 July"),  # not the full stop
        ("Due Mar. 5, 2024", "date", "Mar. 5, 2024"),
        ("GRAND HOTEL", "name", "GRAND HOTEL"),
        ("Email support@example.com today", "email", "support@example.com"),
        ("Visit www.example.org/help for more.", "url", "www.example.org/help"),
        ("  Blue line  ", "cell", "Blue line"),
    ],
)
def test_the_one_span(text, kind, span):
    found = exact_span(text, kind)
    assert found is not None and found.text == span, candidates(text, kind)
    assert text[found.start : found.end] == found.text  # exactly as written


@pytest.mark.parametrize(
    "text,kind",
    [
        ("Open Monday to Friday", "day"),  # two days
        ("周一至周五营业", "day"),
        ("本店每周一次大扫除", "day"),  # 'once a week', no day
        ("Issued 2024-03-05, due 2024-04-05", "date"),
        ("Subtotal $10.00 Tax $2.50", "amount"),
        ("Invoice INV-2024-0042 for order 7781", "id"),  # two ids: the caller must name the key
        ("Take 100ml twice on the 3rd day", "id"),  # quantities and ordinals are not ids
        ("The function parseHeader calls readLine twice.", "identifier"),
        ("March 5, 2024 at 14:30 for $12.50", "number"),  # every number there is a date/time/amount
        ("Contact Maria Lopez for details.", "name"),  # 'Contact' may be a verb or a name
        ("Spare keys are now kept in Room 330.", "name"),  # a place, not a person
        ("Meet at Gate 12B or Gate 14", "place"),
        ("Night buses will run every fifteen minutes", "number"),
        ("Ratio 3:2 applies", "time"),
        ("", "cell"),
    ],
)
def test_abstains_when_none_or_several(text, kind):
    assert exact_span(text, kind) is None, candidates(text, kind)


def test_more_specific_kinds_claim_their_text():
    text = "Order A-10293 on 5 March 2024 at 14:30, total $45.00"
    assert [c.text for c in candidates(text, "number")] == []
    assert [c.text for c in candidates(text, "id")] == ["A-10293"]
    assert [c.value for c in candidates("2024-03-05 / 5 March 2024", "date")] == ["2024-3-5"] * 2


def test_unknown_kind_is_named():
    with pytest.raises(ValueError, match=r"unknown span kind 'colour'; kinds: email, url, date"):
        exact_span("red", "colour")
    assert {
        "weekday",
        "date",
        "time",
        "when",
        "amount",
        "id",
        "identifier",
        "number",
        "name",
        "cell",
        "text",
    } <= set(KINDS)
