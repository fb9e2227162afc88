"""A model request's list price, from rates worked out once per model price rather than at every request.

genai-prices' `calc_price` finds a model in a snapshot's table cheaply (it caches the lookup) but then, at
every call, resolves the price's keys, validates them against its unit registry and decomposes the usage
into leaves (input less its cached parts, and so on): ~90 µs a request, most of a traced turn's pricing.
None of that depends on the token counts. A `_Plan` keeps, per resolved `ModelPrice` (time-conditional
prices are still chosen at each request, by genai-prices' own `get_prices`), each priced unit's leaf as a
sum of the four counts Frobozz reports with their signs, and prices the leaves as genai-prices' `calc_unit_price`
does (its tiers, by input tokens; the same Decimal operations), adding them in its own order: the same
Decimal as `calc_price`. Whatever the plan cannot vouch for (a unit it would have to infer, a negative leaf, a price
with request variants, a package whose internals moved) goes to `calc_price` itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

log = logging.getLogger("frobozz.engine")
PROVIDER = "anthropic"
# Anthropic's usage, as the four counts genai-prices reads (its input count holds the cached tokens too)
_REPORTED = ("input_tokens", "cache_write_tokens", "cache_read_tokens", "output_tokens")


@dataclass(frozen=True)
class _Plan:
    """One resolved price: per priced unit that can cost anything (genai-prices' order), its base rate, its
    tiers as (start, rate) from the highest down, its `per`, and its leaf as (index into the reported counts,
    sign) pairs (None: a price per request, a count of one); and whether any price is tiered (by input
    tokens: a tier's rate applies to every token above its start)."""

    units: tuple[tuple[Decimal, tuple[tuple[int, Decimal], ...], int, tuple[tuple[int, int], ...] | None], ...]
    tiered: bool


_lock = threading.Lock()
_models: dict[str, Any] = {}  # model ref -> genai-prices' ModelInfo (or None: not in the table)
_plans: dict[int, tuple[Any, _Plan | None]] = {}  # id(ModelPrice) -> (the ModelPrice, kept alive; its plan)


def _reported(usage: Mapping[str, int]) -> tuple[int, int, int, int]:
    created, read = usage.get("cache_creation_input_tokens", 0), usage.get("cache_read_input_tokens", 0)
    return (usage.get("input_tokens", 0) + created + read, created, read, usage.get("output_tokens", 0))


def exact_cost(model: str, usage: Mapping[str, int]) -> Decimal | None:
    """genai-prices' own `calc_price` of one Anthropic request (the reference the plans are held to)."""
    from genai_prices import Usage, calc_price

    counts = _reported(usage)
    try:
        price = calc_price(Usage(**dict(zip(_REPORTED, counts, strict=True))), model, provider_id=PROVIDER)
    except (LookupError, ValueError):
        return None
    return price.total_price


def cost(model: str, usage: Mapping[str, int], *, now: datetime | None = None) -> Decimal | None:
    """The request's list price in USD, as `calc_price` gives it, from the model price's plan; None for a
    model the table does not know or counts it refuses."""
    info = _model(model)
    if info is None:
        return None
    model_price = info.get_prices(now or datetime.now(tz=UTC))
    entry = _plans.get(id(model_price))
    if entry is None or entry[0] is not model_price:
        entry = (model_price, _plan(model_price))
        with _lock:
            _plans[id(model_price)] = entry
    plan = entry[1]
    counts = _reported(usage)
    if plan is None or any(c < 0 for c in counts):
        return exact_cost(model, usage)
    total_input = counts[0] if plan.tiered else 0
    total = Decimal(0)
    for base, tiers, per, leaf in plan.units:  # genai-prices' calc_unit_price, the same Decimal operations
        value = 1 if leaf is None else sum(sign * counts[index] for index, sign in leaf)
        if value < 0:  # more cached than input: genai-prices' own error (and so None)
            return exact_cost(model, usage)
        if value:
            rate = base
            for start, tier_rate in tiers:
                if total_input > start:
                    rate = tier_rate
                    break
            total += rate * Decimal(value) / per
    return total


def _model(model: str) -> Any:
    if model in _models:
        return _models[model]
    from genai_prices import data_snapshot

    try:
        _, info = data_snapshot.get_snapshot().find_provider_model(model, None, PROVIDER, None)
    except LookupError:
        info = None
    with _lock:
        if len(_models) > 1000:  # model names come from responses: a bound, not a leak
            _models.clear()
        _models[model] = info
    return info


def _plan(model_price: Any) -> _Plan | None:
    """The plan of a resolved price, or None when it needs more than the four counts can say for sure."""
    try:
        from genai_prices.decompose import is_descendant_or_self
        from genai_prices.types import TieredPrices, Usage, _collect_resolved_model_prices
        from genai_prices.units import _get_registry
        from genai_prices.validation import validate_priced_units

        registry = _get_registry()
        resolved = _collect_resolved_model_prices(model_price, registry)
        validate_priced_units(tuple(unit for unit, _ in resolved), registry)
        everything = Usage(**dict.fromkeys(_REPORTED, 1))  # each count reported: what inference sees at most
        leaves: dict[str, dict[int, int]] = {}
        priced = sorted(
            (unit for unit, _ in resolved if unit.usage_key != "requests"),
            key=lambda unit: (-len(unit.dimensions), unit.usage_key),
        )
        for unit in priced:  # genai-prices' decomposition, on signs of the counts instead of their values
            if unit.usage_key in _REPORTED:
                leaf = {_REPORTED.index(unit.usage_key): 1}
            elif getattr(everything, unit.usage_key) == 0:
                leaf = {}  # never reported, and nothing reported would make it inferred as other than 0
            else:
                return None
            for other in priced:
                if other is not unit and is_descendant_or_self(unit, other):
                    for index, sign in leaves[other.usage_key].items():
                        leaf[index] = leaf.get(index, 0) - sign
            leaves[unit.usage_key] = {i: s for i, s in leaf.items() if s}
        units = tuple(
            (
                price.base if isinstance(price, TieredPrices) else price,
                tuple((t.start, t.price) for t in reversed(price.tiers)) if isinstance(price, TieredPrices) else (),
                unit.per,
                None if unit.usage_key == "requests" else tuple(leaves[unit.usage_key].items()),
            )
            for unit, price in resolved
            if unit.usage_key == "requests" or leaves[unit.usage_key]  # a leaf of nothing costs nothing
        )
        return _Plan(units, any(isinstance(p, TieredPrices) for _, p in resolved))
    except Exception as e:  # noqa: BLE001 - an internal that moved, a price it refuses: calc_price decides
        log.debug("prices: no plan for %r (%s); calc_price prices it", model_price, e)
        return None
