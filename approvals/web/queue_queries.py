"""The reviewer dashboard's queries: which requests a person sees in the queue and
history, in which order, and the sidebar's counts.

Nothing here changes state (that is `approvals.services`); views call `queue`,
`history` and `queue_counts`, then `cards.build_cards` for what each card shows.
Filtering is `approvals.filters.ApprovalRequestFilterSet`, the list API's too.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When
from django.utils import timezone

from ..filters import EXPIRING_SOON, ApprovalRequestFilterSet
from ..models import ApprovalRequest
from ..permissions import decidable_by
from ..states import RiskLevel

__all__ = [
    "COUNT_CAP",
    "EXPIRING_SOON",
    "GROUP_LIMIT",
    "ORDERS",
    "QUEUE_LIMIT",
    "QUEUE_WINDOW",
    "more_than_shown",
    "window",
    "batch_key",
    "capped_count",
    "queue",
    "queue_counts",
    "queue_page",
    "queue_rank",
]

# The queue renders at most this many cards (the most urgent); counts cover all. A
# reviewer works from the top and the page's resync brings the next card in as each
# is decided, so a longer page only costs render time (~1.2 ms per card).
QUEUE_LIMIT = 25
# The most rows the queue's window lists (?shown=); past it, filters narrow the queue.
QUEUE_WINDOW = 500
# A batch shows as one group of at most this many members (the batch API's limit too):
# an agent that puts 10,000 calls under one batch id cannot make one page read them all.
GROUP_LIMIT = 100
# Sidebar counts are exact up to here, then read "1,000+" (see queue_counts).
COUNT_CAP = 1000
# The levels a queue can hold, in the order the queue and its sidebar show them.
_QUEUE_LEVELS = RiskLevel.most_severe_first()
# Each level's place in that order, looked up by the stored string (a RiskLevel is one).
_QUEUE_RANKS: dict[str, int] = {level: rank for rank, level in enumerate(_QUEUE_LEVELS)}


# The orders a reviewer may choose (`?order=`), each with the words the queue's header
# shows. Urgency is the default: with every rule on the same TTL a deadline-only order
# put a critical request submitted last below every medium one.
ORDERS = {
    "urgency": "Most urgent first: highest risk, then the nearest deadline.",
    "deadline": "Nearest deadline first, then highest risk.",
    "age": "Oldest first: longest waiting at the top.",
}
DEFAULT_ORDER = "urgency"


def queue_rank(level: str) -> int:
    """Where `level` sorts (0 first, the most severe); `Card.sort_key` uses it too,
    so it must match `_risk_rank`."""
    return _QUEUE_RANKS.get(level, len(_QUEUE_LEVELS))


def _risk_rank() -> Case:
    return Case(
        *(When(risk_level=level, then=Value(queue_rank(level))) for level in _QUEUE_LEVELS),
        default=Value(len(_QUEUE_LEVELS)),
        output_field=IntegerField(),
    )


def _narrowed(filters: ApprovalRequestFilterSet | None, requests: QuerySet) -> QuerySet:
    return requests if filters is None else filters.narrow(requests)


def open_for(user, *, now=None) -> QuerySet:
    """Pending requests `user` may decide whose deadline has not passed (a request past
    `decide_by` reads as expired even before the sweeper persists it)."""
    return decidable_by(user, ApprovalRequest.objects.pending()).filter(decide_by__gt=now or timezone.now())


def order_of(name: str | None) -> str:
    """A known order's name; anything else (a hand-edited URL) is the default."""
    return name if name in ORDERS else DEFAULT_ORDER


_ORDERINGS = {
    "urgency": ("risk_rank", "decide_by", "created_at"),
    "deadline": ("decide_by", "risk_rank", "created_at"),
    "age": ("created_at", "risk_rank", "decide_by"),
}


def queue(user, filters: ApprovalRequestFilterSet | None = None, *, order: str = DEFAULT_ORDER, now=None) -> QuerySet:
    """The whole queue in `order` (see ORDERS): for counting, membership and the
    API; a page of it is `queue_page`, which reads it the index's way."""
    return (
        _narrowed(filters, open_for(user, now=now))
        .annotate(risk_rank=_risk_rank())
        .order_by(*_ORDERINGS[order_of(order)], "pk")
    )


def window(asked: str | None) -> int:
    """How many rows the queue lists (``?shown=``): a window that grows a page of
    QUEUE_LIMIT at a time ("Show 25 more", or j past the last row), up to QUEUE_WINDOW."""
    try:
        wanted = int(asked or "")
    except ValueError:
        wanted = QUEUE_LIMIT
    pages = -(-max(wanted, 1) // QUEUE_LIMIT)  # whole pages, rounded up
    return min(pages * QUEUE_LIMIT, QUEUE_WINDOW)


def more_than_shown(counts: dict[str, Any], shown: int) -> bool:
    """Whether the queue holds more than the page lists ("Showing the first 25.")."""
    return bool(counts["capped"] or counts["total"] > shown)


def queue_page(
    user,
    filters: ApprovalRequestFilterSet | None = None,
    *,
    order: str = DEFAULT_ORDER,
    limit: int = QUEUE_LIMIT,
    related: tuple[str, ...] = (),
    now=None,
) -> list:
    """The first `limit` requests of `queue(...)` in the same order.

    Urgency is read one risk level at a time, most severe first, each slice in
    deadline order: the (state, risk_level, decide_by) index serves every slice, so
    the page costs at most four short index reads at 100k requests instead of a sort
    of every pending row by a computed rank. The other orders are one indexed read.
    `related`: relations to join in the same reads (`cards.CARD_RELATIONS`).

    The members of a batch stay together (see `_whole_batches`), so a page may hold
    a few more than `limit` requests.
    """
    everything = queue(user, filters, order=order, now=now).select_related(*related)
    if order_of(order) != "urgency":
        return _whole_batches(list(everything[:limit]), everything, limit)
    page: list = []
    for level in _QUEUE_LEVELS:
        if len(page) >= limit:
            break
        # Within a level the rank is constant: ordering by it would hide the index order.
        one_level = everything.filter(risk_level=level).order_by("decide_by", "created_at", "pk")
        page.extend(one_level[: limit - len(page)])
    return _whole_batches(page, everything, limit)


def batch_key(request) -> tuple[Any, str] | None:
    """What a batch is grouped by: the agent and its batch id. Batch ids are the
    agents' own words, so another agent reusing one never joins the group (nor a
    reviewer's "approve all"). None for a request submitted alone."""
    return (request.agent_id, request.batch_id) if request.batch_id else None


def _whole_batches(page: list, everything: QuerySet, limit: int) -> list:
    """`page` with the members of each batch side by side, where the order puts its
    most urgent member (a group sorts by its most urgent member; within it, members
    keep the queue's order).

    A page shorter than `limit` is the whole queue, so nothing can be missing. A full
    page may have cut a batch: one more query (at most GROUP_LIMIT rows, in the
    queue's order) brings the rest of the batches it shows, so "approve all" is over
    every member the reviewer could decide, never a page-sized slice of them. The
    members pulled forward then push the least urgent entries off the page (a group
    is never cut; the page ends at the first entry that reaches `limit`), so a page
    still renders about `limit` cards: with every request in a batch of three, the
    100k benchmark's page would otherwise render three times as many.
    """
    groups: dict[tuple[Any, str], list] = {}
    for request in page:
        key = batch_key(request)
        if key is not None:
            groups.setdefault(key, []).append(request)
    if not groups:
        return page
    if len(page) >= limit:
        same_batch = Q()
        for agent_id, batch_id in groups:
            same_batch |= Q(agent_id=agent_id, batch_id=batch_id)
        shown = [request.pk for request in page]
        for request in everything.filter(same_batch).exclude(pk__in=shown)[:GROUP_LIMIT]:
            key = batch_key(request)
            if key is None:
                continue  # cannot happen: `same_batch` matched only requests with a batch id
            members = groups[key]
            if len(members) < GROUP_LIMIT:
                members.append(request)
    arranged: list = []
    for request in page:
        if len(arranged) >= limit:
            break  # a group pulled forward its later members: the page stays about `limit` cards
        key = batch_key(request)
        if key is None:
            arranged.append(request)
        elif key in groups:
            arranged.extend(groups.pop(key))  # at the first (most urgent) member's place
    return arranged


def _capped_count(requests: QuerySet) -> int:
    """How many rows `requests` has, reading at most COUNT_CAP + 1 of them."""
    return requests.order_by().values("pk")[: COUNT_CAP + 1].count()


def queue_counts(user, filters: ApprovalRequestFilterSet | None = None, *, now=None) -> dict[str, Any]:
    """The sidebar for the queue under `filters` (the page's own: the total and its
    breakdown always describe the list beside them): per risk level and expiring
    soon, each exact up to COUNT_CAP (then shown as "1,000+"), and the filter choices
    (from the unfiltered queue, so the other values stay choosable).

    Exact counts of a 100k queue would each visit every permitted row (~200 ms apiece);
    capped counts read at most COUNT_CAP + 1 rows of an index range, so the page costs
    the same at 1k and 100k, and a reviewer learns what matters ("more than you can
    read today"). The filter choices are the agents and action types among the
    COUNT_CAP most urgent requests (a selected filter stays selectable in the form).
    Seven queries: the user's groups, four per-risk counts, expiring, the most urgent rows.
    """
    now = now or timezone.now()
    base = open_for(user, now=now)
    matching = _narrowed(filters, base)
    by_risk = {level: _capped_count(matching.filter(risk_level=level)) for level in _QUEUE_LEVELS}
    urgent = base.order_by("decide_by").values_list("agent__name", "action_type")[:COUNT_CAP]
    pairs = set(urgent)  # (agent, action type) strings only: parsing 1,000 deadlines cost more than a query
    capped = any(n > COUNT_CAP for n in by_risk.values())
    return {
        # An int while exact; "1,000+" once any level passes the cap.
        "total": _shown(COUNT_CAP + 1) if capped else sum(by_risk.values()),
        "capped": capped,
        "by_risk": [(level, _shown(n), level.colour) for level, n in by_risk.items()],
        "expiring": _shown(_capped_count(matching.filter(decide_by__lte=now + EXPIRING_SOON))),
        "agents": sorted({agent for agent, _ in pairs}),
        "action_types": sorted({action for _, action in pairs}),
    }


def capped_count(requests: QuerySet) -> int | str:
    """The count as shown: exact up to COUNT_CAP, then "1,000+"."""
    return _shown(_capped_count(requests))


def _shown(n: int) -> int | str:
    return f"{COUNT_CAP:,}+" if n > COUNT_CAP else n
