"""Receipts, invoices, forms and till slips with key-value questions (total, date, number) next to
distractor amounts (subtotal, tax, discount, line items); in English and in Chinese."""

from __future__ import annotations

import random

import numpy as np

from ..items import EvalItem
from ..render import render_document
from .common import Ctx, save_png

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _money(rng: random.Random, lo: float, hi: float) -> float:
    return round(rng.uniform(lo, hi), 2)


def _lines(rng: random.Random, names: tuple[str, ...], k: int) -> list[tuple[str, float]]:
    return [(rng.choice(names), _money(rng, 1.5, 14)) for _ in range(k)]


def receipt_rows(layout: str, rng: random.Random) -> tuple[list, dict[str, str], str]:
    """(rows for render_document, {key: gold value}, document noun) for one layout."""
    items = _lines(
        rng,
        ("Coffee", "Bagel", "Muffin", "Tea", "Salad", "Soup", "Juice", "Wrap"),
        rng.randint(3, 6),
    )
    sub = round(sum(p for _, p in items), 2)
    tax = round(sub * rng.choice((0.05, 0.08, 0.1, 0.2)), 2)
    total = f"{sub + tax:.2f}"
    y, m, d = rng.randint(2019, 2025), rng.randint(1, 12), rng.randint(1, 28)
    num = f"{rng.randint(10000, 99999)}"
    if layout == "receipt":  # keys left, values right-aligned on the same row
        date = f"{y}-{m:02d}-{d:02d}"
        rows = [
            [("GREEN LEAF DELI", 0.5, "center")],
            [("DATE", 0, "left"), (date, 1, "right")],
            [("RECEIPT NO", 0, "left"), (num, 1, "right")],
            [("-", 0, "left")],
        ]
        rows += [[(n.upper(), 0, "left"), (f"{p:.2f}", 1, "right")] for n, p in items]
        rows += [
            [("-", 0, "left")],
            [("SUBTOTAL", 0, "left"), (f"{sub:.2f}", 1, "right")],
            [("TAX", 0, "left"), (f"{tax:.2f}", 1, "right")],
            [("TOTAL", 0, "left"), (total, 1, "right")],
        ]
        return rows, {"total": total, "date": date, "number": num}, "receipt"
    if layout == "form":  # 'Key: value' in one span
        date = f"{d:02d}/{m:02d}/{y}"
        rows = [
            [("EXPENSE CLAIM FORM", 0.5, "center")],
            [],
            [(f"Claim number: {num}", 0, "left")],
            [(f"Date: {date}", 0, "left")],
            [(f"Employee: {rng.choice(('A. Novak', 'J. Smith', 'L. Moreau'))}", 0, "left")],
            [],
        ]
        rows += [[(f"{n}: {p:.2f}", 0, "left")] for n, p in items]
        rows += [
            [(f"Subtotal: {sub:.2f}", 0, "left")],
            [(f"Tax: {tax:.2f}", 0, "left")],
            [(f"Total: {total}", 0, "left")],
        ]
        return rows, {"total": total, "date": date, "number": num}, "claim"
    if layout == "invoice":  # header keys with the value on the next row; $ amounts
        date, inv = f"{d} {MONTHS[m - 1]} {y}", f"INV-{num}"
        rows = [
            [("ACME SUPPLY CO.", 0, "left"), ("INVOICE", 1, "right")],
            [],
            [("Invoice Number", 0, "left"), ("Invoice Date", 0.55, "left")],
            [(inv, 0, "left"), (date, 0.55, "left")],
            [],
            [("Item", 0, "left"), ("Qty", 0.55, "left"), ("Amount", 1, "right")],
            [("-", 0, "left")],
        ]
        rows += [
            [(n, 0, "left"), (str(rng.randint(1, 4)), 0.55, "left"), (f"${p:.2f}", 1, "right")]
            for n, p in items
        ]
        rows += [
            [("-", 0, "left")],
            [("Sub-total", 0.55, "left"), (f"${sub:.2f}", 1, "right")],
            [("Sales tax", 0.55, "left"), (f"${tax:.2f}", 1, "right")],
            [("Total due", 0.55, "left"), (f"${total}", 1, "right")],
        ]
        return rows, {"total": total, "date": date, "number": inv}, "invoice"
    if layout != "register":
        raise ValueError(f"unknown receipt layout '{layout}'")
    # a till slip with '#' numbers, keys in mixed case, amounts after a colon
    date = f"{m:02d}/{d:02d}/{y}"
    rows = [
        [("Harbor Market", 0.5, "center")],
        [(f"Order # {num}", 0, "left"), (date, 1, "right")],
        [("-", 0, "left")],
    ]
    rows += [[(f"{n} x{rng.randint(1, 3)}", 0, "left"), (f"{p:.2f}", 1, "right")] for n, p in items]
    rows += [
        [("-", 0, "left")],
        [(f"Subtotal: {sub:.2f}", 1, "right")],
        [(f"Tax: {tax:.2f}", 1, "right")],
        [(f"Total: {total}", 1, "right")],
    ]
    return rows, {"total": total, "date": date, "number": num}, "order"


def receipt_page(ctx: Ctx, layout: str) -> tuple[np.ndarray, dict[str, str], str, int]:
    """(pixels, gold values by key, document noun, font size) of one English receipt."""
    rng = ctx.rng
    rows, gold, noun = receipt_rows(layout, rng)
    size = rng.randint(16, 26)
    page = render_document(rows, rng.choice(ctx.spec.fonts.body), size, rng.randint(28, 40) * size)
    return page, gold, noun, size


def receipt(ctx: Ctx) -> list[EvalItem]:
    """Three questions per document: its total, its date and its number."""
    items = []
    for i in range(ctx.n):
        layout = ctx.spec.receipt_layouts[i % len(ctx.spec.receipt_layouts)]
        page, gold, noun, size = receipt_page(ctx, layout)
        path = save_png(page, ctx.path(f"doc_{i}.png"))
        for q, (key, value) in enumerate(gold.items()):
            items.append(
                ctx.item(
                    3 * i + q,
                    media_kind="document",
                    media=(path,),
                    question=ctx.spec.ask(f"receipt_{key}", ctx.rng, noun=noun),
                    answer=value,
                    kind="doc",
                    target="key_value",
                    text_size=size,
                    frames=(0,),
                )
            )
    return items


def zh_receipt_page(ctx: Ctx) -> tuple[np.ndarray, dict[str, str], int]:
    """A Chinese till receipt in the split's CJK font: (pixels, gold values, font size)."""
    rng, zh = ctx.rng, ctx.spec.zh_receipt
    if zh is None:
        raise ValueError(f"split '{ctx.split}': the zh_receipt genre needs the spec's zh_receipt")
    goods = _lines(rng, zh.goods, rng.randint(3, 6))
    sub = round(sum(p for _, p in goods), 2)
    discount = round(rng.uniform(1, min(10.0, sub / 4)), 2)
    total = f"{sub - discount:.2f}"
    y, m, d = rng.randint(2019, 2025), rng.randint(1, 12), rng.randint(1, 28)
    date = f"{y}-{m:02d}-{d:02d}" if zh.date_style == "iso" else f"{y}年{m}月{d}日"
    number = f"{y}{m:02d}{d:02d}{rng.randint(1000, 9999)}"
    cur = zh.currency
    rows: list[list[tuple[str, float, str]]] = [
        [(rng.choice(zh.shops), 0.5, "center")],
        [(f"{zh.date_label}：{date}", 0, "left")],
        [(f"{zh.number_label}：{number}", 0, "left")],
        [("-", 0, "left")],
    ]
    rows += [
        [(name, 0, "left"), (f"x{rng.randint(1, 3)}", 0.6, "left"), (f"{cur}{p:.2f}", 1, "right")]
        for name, p in goods
    ]
    rows += [
        [("-", 0, "left")],
        [(zh.subtotal_label, 0, "left"), (f"{cur}{sub:.2f}", 1, "right")],
        [(zh.discount_label, 0, "left"), (f"-{cur}{discount:.2f}", 1, "right")],
        [(zh.total_label, 0, "left"), (f"{cur}{total}", 1, "right")],
    ]
    if zh.paid_label:
        rows.append([(zh.paid_label, 0, "left"), (f"{cur}{total}", 1, "right")])
    rows.append([("谢谢惠顾", 0.5, "center")])
    size = rng.randint(18, 26)
    page = render_document(rows, ctx.spec.fonts.cjk, size, rng.randint(18, 26) * size)
    return page, {"total": total, "date": date, "number": number}, size


def zh_receipt(ctx: Ctx) -> list[EvalItem]:
    """Per receipt: the total asked in Chinese, the date or the number asked in Chinese, and on
    every other receipt the total asked in English."""
    items = []
    k = 0
    for i in range(ctx.n):
        page, gold, size = zh_receipt_page(ctx)
        path = save_png(page, ctx.path(f"zh_receipt_{i}.png"))
        asks = [
            ("zh_receipt_total", "total", "zh"),
            (
                "zh_receipt_date" if i % 2 == 0 else "zh_receipt_number",
                "date" if i % 2 == 0 else "number",
                "zh",
            ),
        ]
        if i % 2 == 1:
            asks.append(("zh_receipt_total_en", "total", "en"))
        for slot, key, lang in asks:
            items.append(
                ctx.item(
                    k,
                    media_kind="document",
                    media=(path,),
                    question=ctx.spec.ask(slot, ctx.rng),
                    answer=gold[key],
                    kind="doc",
                    target="key_value",
                    lang=lang,
                    text_size=size,
                    frames=(0,),
                )
            )
            k += 1
    return items
