"""A request's price from rates worked out once per model: the same Decimal genai-prices' `calc_price` gives,
for every Anthropic model in its table, across the 200k-token tier boundary, with time-conditional prices
chosen at the request's time, and None where `calc_price` refuses."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from genai_prices import Usage, calc_price, data_snapshot

from frobozz.engine import _prices
from frobozz.engine._prices import cost, exact_cost

INPUTS = (0, 1, 999, 199_999, 200_000, 200_001, 1_000_000)  # the tier starts at 200k: above it, not at it
WRITES = (0, 5, 150_000)
READS = (0, 7, 60_000)
OUTPUTS = (0, 123, 64_000)


def _anthropic_models() -> list[str]:
    return [m.id for m in data_snapshot.get_snapshot().find_provider(None, "anthropic", None).models]


def _usage(fresh: int, written: int, read: int, out: int) -> dict[str, int]:
    return {
        "input_tokens": fresh,
        "cache_creation_input_tokens": written,
        "cache_read_input_tokens": read,
        "output_tokens": out,
    }


def _reference(model: str, usage: dict[str, int], when: datetime | None = None):
    """calc_price itself, on the counts as the proxy reports them (cached tokens inside the input's)."""
    written, read = usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"]
    try:
        return calc_price(
            Usage(
                input_tokens=usage["input_tokens"] + written + read,
                cache_write_tokens=written,
                cache_read_tokens=read,
                output_tokens=usage["output_tokens"],
            ),
            model,
            provider_id="anthropic",
            genai_request_timestamp=when,
        ).total_price
    except (LookupError, ValueError):
        return None


def test_every_anthropic_model_is_priced_as_calc_price_prices_it_across_the_tier_boundary():
    models = _anthropic_models()
    assert len(models) > 10 and "claude-sonnet-4-5" in models
    differ = [
        (model, counts)
        for model in models
        for counts in itertools.product(INPUTS, WRITES, READS, OUTPUTS)
        if cost(model, _usage(*counts)) != _reference(model, _usage(*counts))
    ]
    assert differ == []
    assert all(_prices._plans[id(p)][1] is not None for p, _ in _prices._plans.values())  # none fell back


def test_a_tiered_model_costs_more_per_token_above_200k_input_tokens_than_at_it():
    at = cost("claude-sonnet-4-5", _usage(200_000, 0, 0, 1000))
    above = cost("claude-sonnet-4-5", _usage(200_001, 0, 0, 1000))
    assert at is not None and above is not None
    assert at == _reference("claude-sonnet-4-5", _usage(200_000, 0, 0, 1000))
    assert above == _reference("claude-sonnet-4-5", _usage(200_001, 0, 0, 1000))
    assert above > at * 3 / 2  # every token at the tier's rate, the output's too


def test_a_model_whose_price_changed_on_a_date_is_priced_at_the_request_s_date():
    changed = [
        m.id
        for m in data_snapshot.get_snapshot().find_provider(None, "anthropic", None).models
        if isinstance(m.prices, list) and any(c.constraint is not None for c in m.prices)
    ]
    assert changed, "the table has no Anthropic price with a start date any more: pick another conditional price"
    usage = _usage(300_000, 1000, 2000, 5000)
    for model in changed:
        for when in (datetime(2025, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)):
            assert cost(model, usage, now=when) == _reference(model, usage, when)


@pytest.mark.parametrize(
    "model, usage",
    [
        ("a-model-nobody-sells", _usage(10, 0, 0, 10)),
        ("", _usage(10, 0, 0, 10)),
        ("claude-sonnet-4-5", _usage(-5, 0, 0, 10)),  # a negative count: calc_price's refusal
        ("claude-sonnet-4-5", {"input_tokens": 10}),  # counts missing: zeros
        ("x" * 10_000, _usage(10, 0, 0, 10)),
    ],
)
def test_what_calc_price_refuses_or_does_not_know_is_priced_as_it_prices_it(model, usage):
    full = _usage(0, 0, 0, 0) | usage
    assert cost(model, usage) == _reference(model, full) == exact_cost(model, usage)


def test_many_unknown_model_names_do_not_grow_the_lookup_without_bound():
    for n in range(1500):
        assert cost(f"made-up-model-{n}", _usage(1, 0, 0, 1)) is None
    assert len(_prices._models) <= 1001
