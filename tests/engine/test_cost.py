"""The seed's cost model, reproduced."""
import pytest

from cascade.cost import ModelShape, TokenBill, decode_flops, prefill_flops

SHAPE = ModelShape(params=1_500_000_000, layers=28, hidden=1536)


def test_prefill_share_of_tokens_is_96_7_percent():
    bill = TokenBill.compute(SHAPE, visual=2880, prompt=50, generated=100)
    assert bill.prefill_token_share == pytest.approx(2930 / 3030)
    assert round(bill.prefill_token_share * 100, 1) == 96.7


def test_formulas():
    n = 2880 + 50
    assert prefill_flops(SHAPE, 2880, 50) == 2 * SHAPE.params * n + 4 * SHAPE.layers * n * n * SHAPE.hidden
    brute = 2 * SHAPE.params * 100 + sum(4 * SHAPE.layers * (n + i) * SHAPE.hidden for i in range(1, 101))
    assert decode_flops(SHAPE, 2880, 50, 100) == pytest.approx(brute)


def test_bill_against_baseline():
    bill = TokenBill.compute(SHAPE, visual=288, prompt=50, generated=10, baseline_visual=2880)
    assert bill.baseline_prefill_flops == prefill_flops(SHAPE, 2880, 50)
    assert bill.prefill_savings > 8
    assert bill.to_dict()["prefill_savings"] == bill.prefill_savings
